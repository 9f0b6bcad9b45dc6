package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// mockTool answers the calls a case mocks and passes the others to the real tool.
type mockTool struct {
	mocks   []spec.Mock
	real    tool.Tool
	realErr error
}

var (
	_ tool.Tool      = (*mockTool)(nil)
	_ tool.Describer = (*mockTool)(nil)
)

// withMocks wraps every factory of a registry so the case's mocks take over the
// calls they match.
func withMocks(reg tool.Registry, mocks []spec.Mock) tool.Registry {
	if len(mocks) == 0 {
		return reg
	}
	byTool := map[string][]spec.Mock{}
	for _, m := range mocks {
		byTool[m.Tool] = append(byTool[m.Tool], m)
	}
	out := tool.Registry{}
	for key, factory := range reg {
		out[key] = func(t *spec.Tool, dir string) (tool.Tool, error) {
			real, err := factory(t, dir)
			if len(byTool[t.Name]) == 0 {
				return real, err
			}
			return &mockTool{mocks: byTool[t.Name], real: real, realErr: err}, nil
		}
	}
	return out
}

func (m *mockTool) Describe() tool.Info {
	if d, ok := m.real.(tool.Describer); ok {
		return d.Describe()
	}
	return tool.Info{}
}

func (m *mockTool) Call(ctx context.Context, in tool.Input) (string, error) {
	for _, mock := range m.mocks {
		if !containsArgs(in.Args, mock.Args) {
			continue
		}
		if mock.Error != "" {
			return "", errors.New(mock.Error)
		}
		if s, ok := mock.Result.(string); ok {
			return s, nil
		}
		b, err := json.Marshal(jsonValue(mock.Result))
		return string(b), err
	}
	if m.real == nil {
		return "", m.realErr
	}
	return m.real.Call(ctx, in)
}

// containsArgs reports whether args hold every key of want with an equal value,
// comparing as JSON (YAML's 3 equals JSON's 3.0).
func containsArgs(args, want map[string]any) bool {
	for k, w := range want {
		v, ok := args[k]
		if !ok || !reflect.DeepEqual(jsonValue(v), jsonValue(w)) {
			return false
		}
	}
	return true
}

func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// remoteMocks are the agent's remote agents (agents[].a2a) as a case sees them:
// its mocks answer their calls, and a call no mock matches fails, since a test
// reaches no server.
func remoteMocks(s *spec.Spec, mocks []spec.Mock) map[string]tool.Tool {
	out := map[string]tool.Tool{}
	for _, a := range s.Agents {
		if !a.Remote() {
			continue
		}
		m := &remoteMock{mockTool{realErr: fmt.Errorf("the remote agent %s is not reached in tests: mock it (mocks: [{tool: %s, result: …}])", a.Name, a.Name)}}
		for _, mock := range mocks {
			if mock.Tool == a.Name {
				m.mocks = append(m.mocks, mock)
			}
		}
		out[a.Name] = m
	}
	return out
}

// remoteMock is a mocked remote agent: like the real one, it passes nothing of
// the user on.
type remoteMock struct{ mockTool }

func (*remoteMock) PassesUser() bool { return false }
