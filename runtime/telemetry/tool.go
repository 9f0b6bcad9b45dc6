package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// WrapTool returns t with a span `execute_tool {tool}` around every call
// (gen_ai.tool.name and gen_ai.tool.call.id from the ToolInput). The result keeps
// t's tool.Describer, the one interface the runtime asks tools for. A nil tp
// means the global provider; opts is at most one Options.
func WrapTool(t tool.Tool, tp trace.TracerProvider, opts ...Options) tool.Tool {
	return wrapTool(t, "", tracerOf(tp), option(opts))
}

func wrapTool(t tool.Tool, kind string, tracer trace.Tracer, o Options) tool.Tool {
	if t == nil {
		return nil
	}
	w := &tracedTool{next: t, kind: kind, tracer: tracer, opts: o}
	if d, ok := t.(tool.Describer); ok {
		return &describedTool{tracedTool: w, d: d}
	}
	return w
}

type tracedTool struct {
	next   tool.Tool
	kind   string // the registry key, when known
	tracer trace.Tracer
	opts   Options
}

type describedTool struct {
	*tracedTool
	d tool.Describer
}

func (t *describedTool) Describe() tool.Info { return t.d.Describe() }

func (t *tracedTool) Call(ctx context.Context, in tool.Input) (string, error) {
	name := OpExecuteTool
	if in.Name != "" {
		name += " " + in.Name
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		AttrOperationName.String(OpExecuteTool),
		AttrToolName.String(in.Name),
		AttrToolType.String(ToolTypeFunction),
	)
	if in.CallID != "" {
		attrs = append(attrs, AttrToolCallID.String(in.CallID))
	}
	// No conversation id here: a server's store id of a conversation may name its
	// user (serve's are "<user>/<id>"); the run's span has the client's id.
	if t.kind != "" {
		attrs = append(attrs, AttrToolKind.String(t.kind))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		out, err := t.next.Call(ctx, in)
		span.End()
		return out, err
	}
	if t.opts.RecordContent {
		span.SetAttributes(AttrToolCallArguments.String(t.opts.text(marshal(in.Args))))
	}
	report := in.OnRemoteTask
	in.OnRemoteTask = func(rt tool.RemoteTask) { // a remote agent's task: on the call's span too
		span.SetAttributes(remoteAttrs(rt)...)
		if report != nil {
			report(rt)
		}
	}
	out, err := t.next.Call(ctx, in)
	if err != nil {
		et := errorType(err)
		span.SetAttributes(AttrErrorType.String(et))
		// A tool's error often quotes what it was given or got back: content.
		if t.opts.RecordContent {
			span.SetStatus(codes.Error, t.opts.text(err.Error()))
		} else {
			span.SetStatus(codes.Error, et)
		}
	} else if t.opts.RecordContent {
		span.SetAttributes(AttrToolCallResult.String(t.opts.text(out)))
	}
	span.End()
	return out, err
}

// WrapRegistry returns a registry whose factories build reg's tools wrapped with
// WrapTool (their spans also carry agentrun.tool.kind, the registry key). reg is not
// changed.
func WrapRegistry(reg tool.Registry, tp trace.TracerProvider, opts ...Options) tool.Registry {
	tracer, o := tracerOf(tp), option(opts)
	out := make(tool.Registry, len(reg))
	for kind, factory := range reg {
		if factory == nil {
			out[kind] = nil
			continue
		}
		out[kind] = func(st *spec.Tool, dir string) (tool.Tool, error) {
			t, err := factory(st, dir)
			if err != nil || t == nil {
				return t, err
			}
			return wrapTool(t, kind, tracer, o), nil
		}
	}
	return out
}

// remoteAttrs are the attributes of a remote agent's task.
func remoteAttrs(rt tool.RemoteTask) []attribute.KeyValue {
	return []attribute.KeyValue{AttrRemoteHost.String(rt.Host), AttrRemoteTask.String(rt.Task),
		AttrRemoteContext.String(rt.Context), AttrRemoteState.String(rt.State)}
}
