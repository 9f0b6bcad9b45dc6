package telemetry

import (
	"encoding/json"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime/model"
)

// scope is the instrumentation scope of every span and metric of this package.
const scope = "github.com/agentrun/agentrun/runtime/telemetry"

// Options choose what the spans record besides their metadata. The zero value
// records no content: no message text, tool arguments or results, questions,
// answers, verdict explanations or stop details — in no span name, attribute or
// event.
type Options struct {
	// RecordContent adds the content: gen_ai.system_instructions,
	// gen_ai.input.messages and gen_ai.output.messages on chat and invoke_agent
	// spans, gen_ai.tool.call.arguments and .result on execute_tool spans,
	// gen_ai.retrieval.query.text on retrieval spans, and error messages of tools.
	RecordContent bool
	// Redact, when set, is applied to every piece of content before it is
	// recorded (the spec's redaction filters).
	Redact func(string) string
}

// option returns the first of opts, or the zero Options.
func option(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}

// text is s as content may be recorded: redacted.
func (o Options) text(s string) string {
	if o.Redact != nil {
		return o.Redact(s)
	}
	return s
}

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(scope, trace.WithInstrumentationVersion(SemconvVersion))
}

func meterOf(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(scope)
}

// part is one part of a message in the conventions' JSON shape of
// gen_ai.input.messages and gen_ai.output.messages.
type part struct {
	Type      string `json:"type"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Response  string `json:"response,omitempty"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// messagesJSON renders messages as the conventions' JSON, content redacted; system
// messages go to system (gen_ai.system_instructions), the rest to the returned list.
func (o Options) messagesJSON(msgs []model.Message) (system, rest string) {
	var sys []part
	var out []message
	for _, m := range msgs {
		if m.Role == model.RoleSystem {
			sys = append(sys, part{Type: "text", Content: o.text(m.Content)})
			continue
		}
		out = append(out, o.message(m, ""))
	}
	if len(sys) > 0 {
		system = marshal(sys)
	}
	return system, marshal(out)
}

func (o Options) message(m model.Message, finish model.FinishReason) message {
	msg := message{Role: string(m.Role), Parts: []part{}, FinishReason: string(finish)}
	if m.Reasoning != nil && m.Reasoning.Text != "" {
		msg.Parts = append(msg.Parts, part{Type: "reasoning", Content: o.text(m.Reasoning.Text)})
	}
	switch {
	case m.Role == model.RoleTool:
		msg.Parts = append(msg.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: o.text(m.Content)})
	case m.Content != "":
		msg.Parts = append(msg.Parts, part{Type: "text", Content: o.text(m.Content)})
	}
	for _, tc := range m.ToolCalls {
		msg.Parts = append(msg.Parts, part{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: o.text(tc.Arguments)})
	}
	return msg
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
