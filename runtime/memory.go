package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// loadMemory reads what the store remembers for this run: the user's facts and, in a
// conversation, its last turns and the entities already revealed. A caller that
// passes History itself keeps it. A store that fails to answer costs the run its
// memory, not the run.
func (r *run) loadMemory() []Fact {
	a := r.agent
	if a.store == nil {
		return nil
	}
	var facts []Fact
	if r.req.User.ID != "" {
		var err error
		if facts, err = a.store.Facts(r.ctx, r.req.User.ID); err != nil {
			r.emit(Event{Kind: EventMemory, Error: err.Error(), Message: "facts could not be read; running without them"})
			facts = nil
		}
	}
	if r.req.Conversation != "" && r.req.History == nil {
		conv, err := a.store.Conversation(r.ctx, r.req.Conversation, a.window)
		if err != nil {
			r.emit(Event{Kind: EventMemory, Error: err.Error(), Message: "history could not be read; running without it"})
			return facts
		}
		if conv.User != "" && conv.User != r.req.User.ID {
			r.foreignConversation = true
			return facts
		}
		r.req.History = conv.Messages
		for kind, ids := range conv.Seen {
			for _, id := range ids {
				if !slices.Contains(r.seen[kind], id) {
					r.seen[kind] = append(r.seen[kind], id)
				}
			}
		}
		r.emit(Event{Kind: EventMemory, Message: fmt.Sprintf("history: %d of %d turns", countTurns(conv.Messages), conv.Turns), Calls: len(conv.Messages)})
	}
	return facts
}

func countTurns(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == RoleUser {
			n++
		}
	}
	return n
}

// commitTimeout bounds the write at the end of a run, which must happen even when the
// run's own context was canceled: the tools' side effects did happen.
const commitTimeout = 5 * time.Second

// commit writes what the run leaves behind in one transaction: the exchange when an
// answer was accepted, the facts its tool calls wrote and the entities they revealed.
func (r *run) commit() {
	a := r.agent
	if a.store == nil || r.req.User.ID == "" && r.req.Conversation == "" {
		return
	}
	if r.foreignConversation {
		return // checked before the run began; nothing of it may touch that conversation
	}
	rec := Record{UserID: r.req.User.ID, Conversation: r.req.Conversation, Facts: r.factChanges, Seen: r.seen}
	if r.result.Completed() {
		rec.Messages = r.result.Messages
	}
	if len(rec.Facts) == 0 && (rec.Conversation == "" || len(rec.Messages) == 0 && len(rec.Seen) == 0) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), commitTimeout)
	defer cancel()
	if err := a.store.Commit(ctx, rec); err != nil {
		r.result.MemoryError = err.Error()
		r.emit(Event{Kind: EventMemory, Error: err.Error(), Message: "the run could not be saved"})
		return
	}
	r.emit(Event{Kind: EventMemory, Message: fmt.Sprintf("saved: %d messages, %d fact changes", len(rec.Messages), len(rec.Facts))})
}

// applyFactRules runs the memory.facts.from_tools rules of a successful call: no model
// involved, the tool's outcome decides.
func (r *run) applyFactRules(c *call) {
	rules := r.agent.spec.Memory.Facts.FromTools
	if len(rules) == 0 || r.agent.store == nil {
		return
	}
	env := map[string]any{"args": c.args, "result": parseResult(c.result), "user": r.exprEnv["user"], "conversation": r.exprEnv["conversation"]}
	for i := range rules {
		rule := &rules[i]
		if rule.On != c.tc.Name {
			continue
		}
		if rule.When != nil && rule.When.Program != nil {
			ok, err := expr.Run(rule.When.Program, env)
			if err != nil {
				r.emit(Event{Kind: EventMemory, Tool: c.tc.Name, Error: err.Error(), Message: "fact rule condition failed"})
				continue
			}
			if b, _ := ok.(bool); !b {
				continue
			}
		}
		for _, op := range []struct {
			name  string
			exprs map[string]*spec.Expr
		}{{FactSet, rule.Set}, {FactAppend, rule.Append}} {
			for _, key := range sortedKeys(op.exprs) {
				e := op.exprs[key]
				if e.Program == nil {
					continue
				}
				v, err := expr.Run(e.Program, env)
				if err != nil || v == nil {
					if err != nil {
						r.emit(Event{Kind: EventMemory, Tool: c.tc.Name, Error: err.Error(), Message: "fact " + key + " not written"})
					}
					continue
				}
				r.factChanges = append(r.factChanges, FactChange{Op: op.name, Key: key, Value: factString(v), Source: "tool", MaxChars: r.agent.maxFactChars})
			}
		}
		for _, key := range rule.Delete {
			r.factChanges = append(r.factChanges, FactChange{Op: FactDelete, Key: key, Source: "tool"})
		}
	}
}

func factString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int:
		return strconv.Itoa(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// extractSystemPrompt asks for facts about the user from their own words only.
const extractSystemPrompt = `You maintain a short list of durable facts about a user of a customer-service assistant:
preferences, restrictions, addresses, names — things worth remembering in later conversations.
You get the facts known so far and the user's own messages. Reply with a JSON object
{"facts": {"key": "new value", "other_key": null}} holding only changes: a new or corrected
value replaces the old one, null deletes a fact that is no longer true. Use short snake_case
keys. Never record secrets such as passwords or card numbers. Reply {"facts": {}} when nothing changed.`

// ExtractFacts asks the model for facts about the user from the user's messages of
// this run and its history, and stores the changes (source llm). Callers run it after
// the answer is shown: it never delays an answer. It does nothing unless the spec
// sets memory.facts.extract: llm, a store and a user are there, and the run completed.
func (a *Agent) ExtractFacts(ctx context.Context, req Request, res *Result) error {
	if a.spec.Memory.Facts.Extract != "llm" || a.store == nil || req.User.ID == "" || !res.Completed() {
		return nil
	}
	facts, err := a.store.Facts(ctx, req.User.ID)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("Known facts:\n")
	if len(facts) == 0 {
		b.WriteString("(none)\n")
	}
	for _, f := range facts {
		fmt.Fprintf(&b, "- %s: %s\n", f.Key, quote(f.Value))
	}
	// The conversation's stored turns already hold this run's when it was saved.
	msgs := res.Messages
	if req.Conversation != "" {
		if conv, err := a.store.Conversation(ctx, req.Conversation, a.window); err == nil && len(conv.Messages) > 0 {
			msgs = conv.Messages
		}
	}
	b.WriteString("\nThe user's messages, oldest first:\n")
	for _, m := range msgs {
		if m.Role == RoleUser && !strings.HasPrefix(m.Content, JudgeFeedbackPrefix) {
			fmt.Fprintf(&b, "- %s\n", quote(m.Content))
		}
	}
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"facts": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []any{"string", "null"}}}},
		"required":   []any{"facts"},
	}
	// A free-form object cannot be described in strict JSON-schema mode, so ask for a
	// JSON object; the schema still tells offline models the shape.
	resp, err := a.model.Complete(ctx, &ModelRequest{
		Messages:   []Message{{Role: RoleSystem, Content: extractSystemPrompt}, {Role: RoleUser, Content: b.String()}},
		JSONSchema: &JSONSchemaFormat{Name: "facts", Schema: schema},
		JSONObject: true,
	})
	if err != nil {
		return fmt.Errorf("fact extraction: %w", err)
	}
	res.Usage.Add(resp.Usage)
	var out struct {
		Facts map[string]*string `json:"facts"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(resp.Message.Content)), &out); err != nil {
		return fmt.Errorf("fact extraction: the answer is not {\"facts\": {…}}: %s", preview(resp.Message.Content))
	}
	var changes []FactChange
	for _, key := range sortedKeys(out.Facts) {
		if v := out.Facts[key]; v == nil {
			changes = append(changes, FactChange{Op: FactDelete, Key: key, Source: "llm"})
		} else {
			changes = append(changes, FactChange{Op: FactSet, Key: key, Value: *v, Source: "llm", MaxChars: a.maxFactChars})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return a.store.Commit(ctx, Record{UserID: req.User.ID, Facts: changes})
}
