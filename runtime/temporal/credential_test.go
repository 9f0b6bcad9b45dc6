package temporal_test

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
)

// The user's credential never enters a workflow's history: the workflow's request
// and a tool call's activity input leave it out, as Temporal's data converter
// encodes them, so a forward_auth call on a worker fails instead of going out
// with a token from the history.
func TestCredentialNotInHistory(t *testing.T) {
	const token = "alice-token-0123456789"
	user := tool.User{ID: "alice", Credential: tool.NewCredential(token)}
	for name, v := range map[string]any{
		"workflow request": temporal.NewRequest(runtime.Request{Input: "hi", User: user}),
		"tool call":        temporal.ToolCall{Name: "whoami", User: user},
	} {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		if data := string(p.GetData()); strings.Contains(data, token) || !strings.Contains(data, `"id":"alice"`) {
			t.Errorf("%s: %s", name, data)
		}
	}
}
