package kinds_test

import (
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// Each kind says from its own configuration whether its calls pass the user on;
// the FAQ cache never learns such a call's answer for everyone.
func TestKindsDeclareWhetherTheyPassTheUser(t *testing.T) {
	const get = "  - name: t\n    parameters: {type: object, properties: {q: {type: string}}}\n"
	tests := []struct {
		name string
		yaml string
		want bool
	}{
		{"an http tool with only the model's arguments", get + "    http: {url: \"https://example.com/menu/{{ args.q }}\"}\n", false},
		{"the user in the URL", get + "    http: {url: \"https://example.com/users/{{ user.id }}/orders\"}\n", true},
		{"the user in a header", get + "    http: {url: \"https://example.com/o\", headers: {X-User: \"{{ user.id }}\"}}\n", true},
		{"a user attribute in the query", get + "    http: {url: \"https://example.com/o\", query: {tenant: \"{{ user.tenant }}\"}}\n", true},
		{"the conversation in the body", get + "    http: {url: \"https://example.com/o\", method: POST, body: {c: \"{{ conversation.id }}\"}}\n", true},
		{"a command, whose environment always holds the user", get + "    command: {run: [cat]}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tool(t, tt.yaml).(runtime.UserPasser)
			if !ok {
				t.Fatal("the kind does not declare whether it passes the user on")
			}
			if got := p.PassesUser(); got != tt.want {
				t.Fatalf("PassesUser() = %v, want %v", got, tt.want)
			}
		})
	}
}
