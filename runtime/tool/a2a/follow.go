package a2a

import (
	"encoding/json"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentrun/agentrun/runtime/tool"
)

// follow is what a call learned of its task so far, from the events of a stream
// or the snapshots of polling.
type follow struct {
	host string
	in   tool.Input

	task, context string
	state         a2a.TaskState
	status        string       // the text of the last status message
	reply         *a2a.Message // the agent answered with a message, no task
	artifacts     []*artifact  // in the order they first came
	said          string       // the text of the task history's last agent message
	reported      string       // the state last reported to the run
}

// artifact is one artifact's text, its chunks appended as they came.
type artifact struct {
	id   a2a.ArtifactID
	text strings.Builder
}

// take learns from one event: a message that answers, a task's snapshot, or an
// update of its status or of one of its artifacts.
func (f *follow) take(ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.Message:
		f.reply = e
	case *a2a.Task:
		f.task, f.context = string(e.ID), e.ContextID
		f.setStatus(e.Status)
		f.artifacts = nil
		for _, art := range e.Artifacts {
			f.addArtifact(art, false)
		}
		for _, m := range e.History {
			if m != nil && m.Role == a2a.MessageRoleAgent {
				f.said = textOf(m.Parts)
			}
		}
	case *a2a.TaskStatusUpdateEvent:
		f.task, f.context = string(e.TaskID), e.ContextID
		f.setStatus(e.Status)
	case *a2a.TaskArtifactUpdateEvent:
		f.task, f.context = string(e.TaskID), e.ContextID
		if e.Artifact != nil {
			f.addArtifact(e.Artifact, e.Append)
		}
	}
	f.report()
}

func (f *follow) setStatus(s a2a.TaskStatus) {
	f.state = s.State
	if s.Message != nil {
		f.status = textOf(s.Message.Parts)
	}
}

// addArtifact adds an artifact's parts, or replaces what it had unless the
// chunk appends.
func (f *follow) addArtifact(art *a2a.Artifact, appends bool) {
	var into *artifact
	for _, have := range f.artifacts {
		if have.id == art.ID {
			into = have
		}
	}
	if into == nil {
		into = &artifact{id: art.ID}
		f.artifacts = append(f.artifacts, into)
	} else if !appends {
		into.text.Reset()
	}
	into.text.WriteString(textOf(art.Parts))
}

// settled reports whether the task got where this call stops following it: an
// answer, a last state, or a question nobody here can answer.
func (f *follow) settled() bool {
	return f.reply != nil || f.state.Terminal() || f.state == a2a.TaskStateInputRequired || f.state == a2a.TaskStateAuthRequired
}

// answer is the text of the reply, or of the task's artifacts, each artifact's
// parts as they came and artifacts apart by a blank line; without artifacts, its
// last status message or the last thing it said. "" when there is none.
func (f *follow) answer() string {
	if f.reply != nil {
		return textOf(f.reply.Parts)
	}
	texts := make([]string, 0, len(f.artifacts))
	for _, art := range f.artifacts {
		if t := strings.TrimSpace(art.text.String()); t != "" {
			texts = append(texts, art.text.String())
		}
	}
	if len(texts) > 0 {
		return strings.Join(texts, "\n\n")
	}
	if f.status != "" {
		return f.status
	}
	return f.said
}

// report tells the run about the task when its state changed.
func (f *follow) report() {
	state := stateName(f.state)
	if f.task == "" || state == f.reported {
		return
	}
	f.reported = state
	f.in.ReportRemoteTask(tool.RemoteTask{Host: f.host, Task: f.task, Context: f.context, State: state})
}

// stateName is a task state in the protocol's words: TASK_STATE_INPUT_REQUIRED
// is input-required.
func stateName(s a2a.TaskState) string {
	if s == a2a.TaskStateUnspecified {
		return "unknown"
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

// textOf is the text of parts: text parts as they are, data parts as JSON; files
// are left out.
func textOf(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			b.WriteString(string(c))
		case a2a.Data:
			if data, err := json.Marshal(c.Value); err == nil {
				b.Write(data)
			}
		}
	}
	return b.String()
}
