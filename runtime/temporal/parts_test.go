package temporal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/proto"
)

// partModel is a model that takes every part.
type partModel struct{ modelFunc }

func (partModel) TakesPart(model.Part) error { return nil }

// A run's attachments cross into the workflow and reach the worker's model byte
// for byte; the history holds them by reference, not inline.
func TestAttachmentsReachTheModelOnTemporal(t *testing.T) {
	desktest.NewBackend(t)
	codec := &temporal.Codec{Blobs: memory.New(), Limit: 16 << 10}
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.NewClientWithOptions(client.Options{DataConverter: codec.DataConverter()})
	image := make([]byte, 64<<10)
	rand.Read(image)
	var mu sync.Mutex
	var got []model.Part
	answer := offline.NewScript("desk", []offline.ScriptTurn{{Text: "A receipt."}})
	m := partModel{func(ctx context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		for _, msg := range req.Messages {
			got = append(got, msg.Parts...)
		}
		mu.Unlock()
		return answer.Complete(ctx, req)
	}}
	w := newWorker(t, c, "parts", compileWith(t, deskSpec, m))
	defer w.Stop()
	part := model.Part{Kind: model.PartImage, MediaType: "image/png", Name: "receipt.png", Data: image, Size: int64(len(image))}
	res, run := runOnTemporal(t, c, "parts", compileWith(t, deskSpec, m), runtime.Request{Input: "what is this?", Parts: []model.Part{part}})
	if res.Stop != runtime.StopCompleted {
		t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Name != "receipt.png" || got[0].MediaType != "image/png" || !bytes.Equal(got[0].Data, image) {
		t.Fatalf("the model got %d parts; want receipt.png with its %d bytes", len(got), len(image))
	}
	hist, err := temporal.History(context.Background(), c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist.Events {
		if n := proto.Size(e); n > 32<<10 {
			t.Errorf("history event %d (%s) holds %d bytes: the image went inline", e.EventId, e.EventType, n)
		}
	}
}
