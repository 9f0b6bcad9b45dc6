package openaitest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestCycle(t *testing.T) {
	next := Cycle(Reply{Content: "a"}, Reply{Content: "b"}, Reply{Status: 503})
	var got []string
	for range 7 {
		r := next(Request{})
		got = append(got, r.Content+map[bool]string{true: "503"}[r.Status == 503])
	}
	want := []string{"a", "b", "503", "a", "b", "503", "a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replies = %v, want %v", got, want)
		}
	}
}

// TestCycleConcurrent: under concurrent requests each reply still goes to an
// equal share of them.
func TestCycleConcurrent(t *testing.T) {
	next := Cycle(Reply{Content: "pass"}, Reply{Content: "fail"})
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			r := next(Request{})
			mu.Lock()
			count[r.Content]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if count["pass"] != 50 || count["fail"] != 50 {
		t.Errorf("counts = %v, want 50 each", count)
	}
}

func TestCycleBy(t *testing.T) {
	next := CycleBy(LastUser, Reply{Content: "1"}, Reply{Content: "2"})
	ask := func(q string) string {
		return next(Request{Messages: []map[string]any{{"role": "system", "content": "s"}, {"role": "user", "content": q}}}).Content
	}
	got := []string{ask("x"), ask("y"), ask("x"), ask("y"), ask("x")}
	want := []string{"1", "1", "2", "2", "1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replies = %v, want %v", got, want)
		}
	}
}

// TestCycleServer: the server of New answers over HTTP in turn.
func TestCycleServer(t *testing.T) {
	s := New(t, Cycle(Reply{Content: "first"}, Reply{Content: "second"}))
	var got []string
	for range 3 {
		resp, err := http.Post(s.URL+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Choices []struct{ Message struct{ Content string } }
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || len(body.Choices) != 1 {
			t.Fatalf("answer: %v %+v", err, body)
		}
		got = append(got, body.Choices[0].Message.Content)
	}
	if strings.Join(got, ",") != "first,second,first" {
		t.Errorf("answers = %v", got)
	}
}

func TestLastUser(t *testing.T) {
	parts := Request{Messages: []map[string]any{
		{"role": "user", "content": "old"},
		{"role": "assistant", "content": "a"},
		{"role": "user", "content": []any{map[string]any{"type": "text", "text": "new "}, map[string]any{"type": "text", "text": "问题"}}},
	}}
	if got := LastUser(parts); got != "new 问题" {
		t.Errorf("LastUser = %q", got)
	}
	if got := LastUser(Request{}); got != "" {
		t.Errorf("LastUser of nothing = %q", got)
	}
}
