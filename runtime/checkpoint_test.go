package runtime_test

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
)

// continueEvery asks a run to checkpoint before every turn it may.
type continueEvery struct{ runtime.LocalHost }

func (continueEvery) ContinueNow() bool { return true }

// A run checkpointed before every turn and continued from each checkpoint
// ends as the same run without checkpoints: the same steps, answer, turns and
// stored exchange, each tool call made once, nothing stored before its end.
func TestCheckpointAndContinue(t *testing.T) {
	turns := func() *recorder {
		return script(calls(tc("lookup", map[string]any{"id": "1"})), calls(tc("lookup", map[string]any{"id": "2"})), say("Both found."))
	}
	req := runtime.Request{Input: "find 1 and 2", User: tool.User{ID: "u-1", Attributes: map[string]string{"tenant": "t1"}}, Conversation: "c-1"}

	straightTool := echo()
	want, err := compileWith(t, baseSpec, nil, runtime.Options{Model: turns(), Store: memory.New()}, map[string]*funcTool{"lookup": straightTool, "other": echo()}).
		Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}

	tool, store := echo(), memory.New()
	a := compileWith(t, baseSpec, nil, runtime.Options{Model: turns(), Store: store}, map[string]*funcTool{"lookup": tool, "other": echo()})
	req.Host = continueEvery{}
	res, err := a.Run(context.Background(), req)
	checkpoints := 0
	for err == nil && res.Checkpoint != nil {
		checkpoints++
		if conv, _ := store.Conversation(context.Background(), "c-1", 10); len(conv.Messages) != 0 {
			t.Fatalf("checkpoint %d: %d messages stored before the run ended", checkpoints, len(conv.Messages))
		}
		res, err = a.Continue(context.Background(), runtime.ContinueRequest{Checkpoint: *res.Checkpoint, Host: continueEvery{}})
	}
	if err != nil {
		t.Fatal(err)
	}
	if checkpoints != 2 {
		t.Errorf("%d checkpoints, want 2 (before the second and the third turn)", checkpoints)
	}
	if res.Stop != want.Stop || res.Answer != want.Answer || res.Turns != want.Turns || len(res.Steps) != len(want.Steps) || tool.calls.Load() != 2 {
		t.Errorf("continued: %s %q turns %d, %d steps, %d calls; straight: %s %q turns %d, %d steps", res.Stop, res.Answer, res.Turns,
			len(res.Steps), tool.calls.Load(), want.Stop, want.Answer, want.Turns, len(want.Steps))
	}
	for i := range res.Steps {
		if g, w := res.Steps[i], want.Steps[i]; g.Tool != w.Tool || g.Arguments != w.Arguments || g.Result != w.Result || g.Turn != w.Turn {
			t.Errorf("step %d: %+v, want %+v", i, g, w)
		}
	}
	conv, _ := store.Conversation(context.Background(), "c-1", 10)
	if conv.Turns != 1 || len(conv.Messages) != len(want.Messages) {
		t.Errorf("stored %d turns, %d messages; want 1, %d", conv.Turns, len(conv.Messages), len(want.Messages))
	}
}
