package telemetry_test

import (
	"testing"

	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

// A traced model takes the parts the model it wraps takes, no more, no fewer.
func TestTracedModelTakesWhatItWrapsTakes(t *testing.T) {
	tp := tracenoop.NewTracerProvider()
	img := model.Part{Kind: model.PartImage, MediaType: "image/png"}
	if err := model.TakesPart(telemetry.WrapModel(offline.Test{}, telemetry.ModelInfo{}, tp, nil), img); err != nil {
		t.Errorf("wrapping the test model: %v, want taken", err)
	}
	if err := model.TakesPart(telemetry.WrapModel(roundModel{}, telemetry.ModelInfo{}, tp, nil), img); err != model.ErrTakesNoParts {
		t.Errorf("wrapping a model without PartTaker: %v, want ErrTakesNoParts", err)
	}
}
