package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
)

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
	if a.settings.Memory.Extract != spec.ExtractLLM || a.store == nil || req.User.ID == "" || !res.Completed() {
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
		if conv, err := a.store.Conversation(ctx, req.Conversation, a.settings.Memory.Window); err == nil && len(conv.Messages) > 0 {
			msgs = conv.Messages
		}
	}
	b.WriteString("\nThe user's messages, oldest first:\n")
	for _, m := range msgs {
		if m.Role == model.RoleUser && !strings.HasPrefix(m.Content, JudgeFeedbackPrefix) {
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
	resp, err := a.model.Complete(ctx, &model.Request{
		Messages:   []model.Message{{Role: model.RoleSystem, Content: extractSystemPrompt}, {Role: model.RoleUser, Content: b.String()}},
		JSONSchema: &model.JSONSchemaFormat{Name: model.SchemaFacts, Schema: schema},
		JSONObject: true,
	})
	if err != nil {
		return fmt.Errorf("fact extraction: %w", err)
	}
	res.Usage.Add(resp.Usage)
	if res.Cost != nil { // known, so the agent's model has a price
		price := a.answeringPrice(PurposeAgent, resp.Answered) // a fallback's, when one answered
		if price == nil {
			res.Cost = nil // a sum that leaves out a call would read as the run's cost
		} else {
			u := resp.Usage
			c := *res.Cost + price.Cost(u.PromptTokens, u.CachedPromptTokens, u.CacheWriteTokens, u.CompletionTokens)
			res.Cost = &c
		}
	}
	var out struct {
		Facts map[string]*string `json:"facts"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(resp.Message.Content)), &out); err != nil {
		return fmt.Errorf("fact extraction: the answer is not {\"facts\": {…}}: %s", preview(resp.Message.Content))
	}
	var changes []store.FactChange
	for _, key := range slices.Sorted(maps.Keys(out.Facts)) {
		if v := out.Facts[key]; v == nil {
			changes = append(changes, store.FactChange{Op: store.FactDelete, Key: key, Source: "llm"})
		} else {
			changes = append(changes, store.FactChange{Op: store.FactSet, Key: key, Value: *v, Source: "llm", MaxChars: a.settings.Memory.MaxFactChars})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return a.store.Commit(ctx, store.Record{UserID: req.User.ID, Facts: changes})
}
