package temporal

import (
	"bytes"
	"context"

	"github.com/agentrun/agentrun/runtime"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// History reads a run's workflow history from the server.
func History(ctx context.Context, c client.Client, id string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

// MarshalHistory is a history as JSON, in the form `temporal workflow show
// --output json` writes and ReadHistory (client.HistoryFromJSON) reads.
func MarshalHistory(h *historypb.History) ([]byte, error) {
	return temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
}

// ReadHistory reads a history MarshalHistory wrote.
func ReadHistory(data []byte) (*historypb.History, error) {
	return client.HistoryFromJSON(bytes.NewReader(data), client.HistoryJSONOptions{})
}

// Replay runs the workflow over a recorded history with the agents' current
// code: an error says the code would decide differently from the run that
// recorded it (it is not deterministic, or it changed incompatibly).
func Replay(h *historypb.History, agents ...*runtime.Agent) error {
	e, _, err := newEngine(agents, Options{})
	if err != nil {
		return err
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(e.run, workflow.RegisterOptions{Name: WorkflowRun})
	return r.ReplayWorkflowHistory(nil, h)
}
