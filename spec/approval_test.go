package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr"
)

// Every form of a tool's approval decodes and compiles — the agent's own tools, MCP
// tools and a skill's — and the agent-level settings resolve, with their defaults
// when the spec leaves them out.
func TestApprovalForms(t *testing.T) {
	l := newTestLoader(t)
	r := l.LoadFile("testdata/valid/approval.yaml")
	if len(r.Diagnostics) > 0 {
		t.Fatal(r.Diagnostics)
	}
	tools := map[string]Tool{}
	for _, tool := range r.Spec.Tools {
		tools[tool.Name] = tool
	}
	env := EnvApproval.Values(&Values{
		Args:         map[string]any{"order_number": "A1", "amount": 150.0, "account": "u1", "invoice": "I9", "to": "a@example.com"},
		User:         UserValue([]string{"tier"}, "u1", map[string]string{"tier": "gold"}),
		Conversation: ConversationValue("c1"),
		Intent:       "billing",
		Seen:         func(string) ([]string, error) { return nil, nil },
		InSeen:       func(any, string) (bool, error) { return false, nil },
	})
	tests := []struct {
		name    string
		when    any // nil: no when (every call)
		message string
		path    string
	}{
		{name: "delete_account", path: "tools[1].approval"},
		{name: "refund", when: true, message: "Refund 150 on A1 for u1 (c1)?", path: "tools[2].approval"},
		{name: "reissue_invoice", when: true, path: "tools[3].approval"},
		{name: "send_email", message: "Send mail to a@example.com?", path: "tools[4].approval"},
		{name: "archive", path: "tools[5].approval"},
		{name: "pay_invoice", when: false, message: "Pay 150 for invoice I9?", path: "tools[0].approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tools[tt.name].Approval
			if a == nil {
				t.Fatal("no approval")
			}
			if a.Path != tt.path {
				t.Errorf("path %q, want %q", a.Path, tt.path)
			}
			switch {
			case tt.when == nil && a.When != nil:
				t.Errorf("when %q, want none", a.When.Source)
			case tt.when != nil && (a.When == nil || a.When.Program == nil):
				t.Fatal("when not compiled")
			case tt.when != nil:
				got, err := expr.Run(a.When.Program, env)
				if err != nil || got != tt.when {
					t.Errorf("when = %v, %v; want %v", got, err, tt.when)
				}
			}
			if tt.message == "" {
				if a.Message != nil {
					t.Errorf("message %q, want none", a.Message.Source)
				}
				return
			}
			if got, err := a.Message.Render(env); err != nil || got != tt.message {
				t.Errorf("message = %q, %v; want %q", got, err, tt.message)
			}
		})
	}
	if pay := tools["pay_invoice"]; !strings.HasSuffix(pay.Approval.Pos.File, "skills/payments/skill.yaml") {
		t.Errorf("the skill tool's approval points at %v", pay.Approval.Pos)
	}
	if tools["list_invoices"].Approval != nil {
		t.Error("a tool without approval has one")
	}
	st := Resolve(r.Spec)
	if st.Approval != (ApprovalSettings{Timeout: 4 * time.Hour, OnTimeout: OnTimeoutStop}) || st.IsDefault("approval.timeout") {
		t.Errorf("settings %+v", st.Approval)
	}
	if st := Resolve(&Spec{}); st.Approval != (ApprovalSettings{Timeout: DefaultApprovalTimeout, OnTimeout: DefaultApprovalOnTimeout}) || !st.IsDefault("approval.on_timeout") {
		t.Errorf("defaults %+v", st.Approval)
	}
}
