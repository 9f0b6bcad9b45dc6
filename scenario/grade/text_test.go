package grade

import (
	"strings"
	"testing"
)

// check compares a grade with the wanted pass, score and reason fragments.
func check(t *testing.T, g Grade, passed bool, score float64, reason ...string) {
	t.Helper()
	if g.Passed != passed || g.Score != score || g.Errored {
		t.Errorf("grade = %+v, want passed %v, score %v", g, passed, score)
	}
	for _, r := range reason {
		if !strings.Contains(g.Reason, r) {
			t.Errorf("reason %q does not say %q", g.Reason, r)
		}
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		name   string
		texts  []string
		answer string
		passed bool
		score  float64
		reason []string
	}{
		{name: "all found", texts: []string{"refund", "3 days"}, answer: "Your refund arrives in 3 days.", passed: true, score: 1,
			reason: []string{`contains "refund" and "3 days"`}},
		{name: "one of two missing", texts: []string{"refund", "3 days"}, answer: "Your refund is on its way.", score: 0.5,
			reason: []string{`does not contain "3 days"`, "1 of 2 missing"}},
		{name: "case counts", texts: []string{"Refund"}, answer: "refund", score: 0, reason: []string{`"Refund"`}},
		{name: "chinese found", texts: []string{"退款", "三个工作日"}, answer: "您的退款将在三个工作日内到账。", passed: true, score: 1,
			reason: []string{`"退款" and "三个工作日"`}},
		{name: "chinese missing", texts: []string{"退款", "订单号", "三个工作日"}, answer: "您的退款已处理。", score: 1.0 / 3,
			reason: []string{`does not contain "订单号" and "三个工作日"`, "2 of 3 missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewContains(tt.texts)
			if err != nil {
				t.Fatal(err)
			}
			check(t, c.Grade(tt.answer), tt.passed, tt.score, tt.reason...)
		})
	}
}

func TestNotContains(t *testing.T) {
	tests := []struct {
		name   string
		texts  []string
		answer string
		passed bool
		score  float64
		reason []string
	}{
		{name: "none found", texts: []string{"password", "API key"}, answer: "I cannot help with that.", passed: true, score: 1,
			reason: []string{`none of "password" and "API key"`}},
		{name: "one found", texts: []string{"password", "API key"}, answer: "The password is hunter2.", score: 0.5,
			reason: []string{`contains "password", which it must not`, "1 of 2 found"}},
		{name: "chinese found", texts: []string{"密码"}, answer: "您的密码是 123456", score: 0,
			reason: []string{`contains "密码"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewNotContains(tt.texts)
			if err != nil {
				t.Fatal(err)
			}
			check(t, c.Grade(tt.answer), tt.passed, tt.score, tt.reason...)
		})
	}
}

func TestRegex(t *testing.T) {
	tests := []struct {
		name, pattern, answer string
		passed                bool
		reason                string
	}{
		{name: "matches", pattern: `order #\d+`, answer: "Your order #1234 is late.", passed: true, reason: `matches /order #\d+/ at "order #1234"`},
		{name: "no match", pattern: `order #\d+`, answer: "Your order is late.", reason: `does not match /order #\d+/`},
		{name: "anchored", pattern: `^\d+$`, answer: "42 apples"},
		{name: "ignore case", pattern: `(?i)refund`, answer: "REFUND issued", passed: true},
		{name: "chinese", pattern: `订单\d{4}`, answer: "订单1234已发货", passed: true, reason: `at "订单1234"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRegex(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			score := 0.0
			if tt.passed {
				score = 1
			}
			check(t, r.Grade(tt.answer), tt.passed, score, tt.reason)
		})
	}
}

func TestEquals(t *testing.T) {
	tests := []struct {
		name, want, answer string
		passed             bool
		reason             string
	}{
		{name: "exact", want: "42", answer: "42", passed: true, reason: `the answer is "42"`},
		{name: "trimmed both", want: " 42\n", answer: "\t42  \n", passed: true},
		{name: "inner space counts", want: "4 2", answer: "42", reason: `the answer is "42", not "4 2"`},
		{name: "case counts", want: "Yes", answer: "yes", reason: `not "Yes"`},
		{name: "chinese", want: "已退款", answer: " 已退款 ", passed: true},
		{name: "chinese differs", want: "已退款", answer: "未退款", reason: `the answer is "未退款", not "已退款"`},
		{name: "empty wanted", want: "", answer: "  ", passed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score := 0.0
			if tt.passed {
				score = 1
			}
			check(t, NewEquals(tt.want).Grade(tt.answer), tt.passed, score, tt.reason)
		})
	}
}

func TestTextGraderErrors(t *testing.T) {
	tests := []struct {
		name string
		make func() error
		want string
	}{
		{name: "contains nothing", make: func() error { _, err := NewContains(nil); return err }, want: "contains: no texts to look for"},
		{name: "contains an empty text", make: func() error { _, err := NewContains([]string{"a", ""}); return err }, want: "contains: text 2 is empty"},
		{name: "not_contains nothing", make: func() error { _, err := NewNotContains([]string{}); return err }, want: "not_contains: no texts to look for"},
		{name: "bad regex", make: func() error { _, err := NewRegex(`(unclosed`); return err }, want: "regex: error parsing regexp: missing closing ): `(unclosed`"},
		{name: "empty regex", make: func() error { _, err := NewRegex(""); return err }, want: "regex: the pattern is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.make()
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
