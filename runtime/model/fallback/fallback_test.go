package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/fallback"
	"github.com/agentrun/agentrun/runtime/model/openai"
	"github.com/agentrun/agentrun/spec"
)

const key = "sk-fallback-secret"

// failing is an OpenAI-compatible server that answers every request with status
// and an error body the way the API does, asking the client to retry at once.
type failing struct {
	URL   string
	calls atomic.Int64
}

func newFailing(t *testing.T, status int) *failing {
	f := &failing{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After-Ms", "1") // the SDK's retry waits 1 ms, not its backoff
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"status %d from the first model","type":"overloaded_error","param":null,"code":null}}`, status)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// openaiModel is the real OpenAI provider pointed at url.
func openaiModel(t *testing.T, name, url string, retries int) *openai.Model {
	t.Helper()
	m, err := openai.New(spec.Model{Name: name, BaseURL: url, APIKeyEnv: "FALLBACK_KEY", Retries: &retries},
		func(k string) (string, bool) { return key, k == "FALLBACK_KEY" })
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func chain(t *testing.T, opts fallback.Options, entries ...fallback.Entry) *fallback.Chain {
	t.Helper()
	c, err := fallback.New(entries, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ask() *model.Request {
	return &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}}
}

func TestFallsBackOnRetryableFaults(t *testing.T) {
	for _, status := range []int{529, 503, 500, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			first := newFailing(t, status)
			second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "from the second"} })
			c := chain(t, fallback.Options{},
				fallback.Entry{Provider: "openai", Name: "first-model", Model: openaiModel(t, "first-model", first.URL, 1)},
				fallback.Entry{Provider: "openai", Name: "second-model", Model: openaiModel(t, "second-model", second.URL, 0)})
			resp, err := c.Complete(context.Background(), ask())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "from the second" {
				t.Errorf("answer %q", resp.Message.Content)
			}
			want := &model.Answered{Provider: "openai", Name: "second-model", FallbackFrom: []string{"first-model"}}
			if a := resp.Answered; a == nil || a.Name != want.Name || a.Provider != want.Provider || !slices.Equal(a.FallbackFrom, want.FallbackFrom) {
				t.Errorf("answered %+v, want %+v", a, want)
			}
			if got := first.calls.Load(); got != 2 {
				t.Errorf("the first model was called %d times, want 2 (its own retry, then the fallback)", got)
			}
		})
	}
}

func TestTheFirstModelAnsweringSaysSo(t *testing.T) {
	first := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "first"} })
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Provider: "openai", Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Provider: "openai", Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	resp, err := c.Complete(context.Background(), ask())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "first" || resp.Answered == nil || resp.Answered.Name != "a" || len(resp.Answered.FallbackFrom) != 0 {
		t.Errorf("got %q answered %+v", resp.Message.Content, resp.Answered)
	}
	if n := len(second.Requests()); n != 0 {
		t.Errorf("the second model got %d requests", n)
	}
}

func TestRefusedRequestsDoNotFallBack(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 413} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			first := newFailing(t, status)
			second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
			c := chain(t, fallback.Options{},
				fallback.Entry{Provider: "openai", Name: "a", Model: openaiModel(t, "a", first.URL, 1)},
				fallback.Entry{Provider: "openai", Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
			_, err := c.Complete(context.Background(), ask())
			var me *model.Error
			if !errors.As(err, &me) || me.Status != status {
				t.Fatalf("error %v, want a model error with status %d", err, status)
			}
			if n := len(second.Requests()); n != 0 {
				t.Errorf("the second model got %d requests after a %d", n, status)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

// refusing is a model whose every call is refused without a status (a part it
// cannot send, a response too large): no fallback model would do better.
type refusing struct{ calls int }

func (r *refusing) Complete(context.Context, *model.Request) (*model.Response, error) {
	r.calls++
	return nil, &model.Error{Err: errors.New("unusable"), Refused: true}
}

func TestARefusedErrorDoesNotFallBack(t *testing.T) {
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: &refusing{}},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	if _, err := c.Complete(context.Background(), ask()); err == nil {
		t.Fatal("no error")
	}
	if n := len(second.Requests()); n != 0 {
		t.Errorf("the second model got %d requests", n)
	}
}

func TestAContentFilterIsAnAnswer(t *testing.T) {
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"a","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}`)
	}))
	t.Cleanup(first.Close)
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	resp, err := c.Complete(context.Background(), ask())
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishContentFilter || resp.Answered.Name != "a" || len(second.Requests()) != 0 {
		t.Errorf("finish %q answered %+v, second got %d requests", resp.FinishReason, resp.Answered, len(second.Requests()))
	}
}

func TestEveryModelFailing(t *testing.T) {
	a, b := newFailing(t, 503), newFailing(t, 529)
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", a.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", b.URL, 0)})
	_, err := c.Complete(context.Background(), ask())
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 529 || !me.Retryable() {
		t.Fatalf("error %v, want the last model's 529", err)
	}
	for _, want := range []string{"every model of the fallback chain failed", "a: model error (HTTP 503)", "b: model error (HTTP 529)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestACanceledCallDoesNotFallBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := openaitest.New(t, func(openaitest.Request) openaitest.Reply {
		cancel()
		return openaitest.Reply{Status: 503}
	})
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	_, err := c.Complete(ctx, ask())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if n := len(second.Requests()); n != 0 {
		t.Errorf("the second model got %d requests after the caller gave up", n)
	}
}

// halfStream streams some text and ends without a finish_reason: a stream cut off
// midway, which the provider reports as a retryable fault.
func halfStream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Half an \"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStreamedTextDoesNotFallBack(t *testing.T) {
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", halfStream(t).URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	req := ask()
	var seen strings.Builder
	req.OnDelta = func(s string) { seen.WriteString(s) }
	_, err := c.Complete(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "already streamed") {
		t.Fatalf("error %v, want one saying text was already streamed", err)
	}
	if seen.String() != "Half an " {
		t.Errorf("streamed %q", seen.String())
	}
	if n := len(second.Requests()); n != 0 {
		t.Errorf("the second model got %d requests after text was streamed", n)
	}
}

func TestAStreamFailingBeforeTextFallsBack(t *testing.T) {
	first := newFailing(t, 503)
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "whole answer"} })
	c := chain(t, fallback.Options{},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	req := ask()
	var seen strings.Builder
	req.OnDelta = func(s string) { seen.WriteString(s) }
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if seen.String() != "whole answer" || resp.Answered.Name != "b" {
		t.Errorf("streamed %q, answered by %+v", seen.String(), resp.Answered)
	}
	if reqs := second.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Errorf("the second model was not asked to stream: %+v", reqs)
	}
}

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTheBreakerOpensAndHalfOpens(t *testing.T) {
	var firstDown atomic.Bool
	firstDown.Store(true)
	first := openaitest.New(t, func(openaitest.Request) openaitest.Reply {
		if firstDown.Load() {
			return openaitest.Reply{Status: 503}
		}
		return openaitest.Reply{Content: "first is back"}
	})
	second := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "second"} })
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := chain(t, fallback.Options{Threshold: 3, Cooldown: 30 * time.Second, Now: clk.now},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	call := func() *model.Response {
		t.Helper()
		resp, err := c.Complete(context.Background(), ask())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	firstCalls := func() int { return len(first.Requests()) }

	for i := range 3 { // three failures open the breaker
		if r := call(); r.Answered.Name != "b" {
			t.Fatalf("call %d answered by %s", i, r.Answered.Name)
		}
	}
	if firstCalls() != 3 {
		t.Fatalf("the first model got %d calls, want 3", firstCalls())
	}
	clk.t = clk.t.Add(29 * time.Second) // open: the first model is skipped
	r := call()
	if firstCalls() != 3 || r.Answered.Name != "b" || !slices.Equal(r.Answered.FallbackFrom, []string{"a"}) {
		t.Fatalf("while open: first got %d calls, answered %+v", firstCalls(), r.Answered)
	}
	clk.t = clk.t.Add(time.Second) // the cooldown is over: one trial, which fails
	call()
	if firstCalls() != 4 {
		t.Fatalf("half-open: first got %d calls, want 4", firstCalls())
	}
	call() // the failed trial opened it again
	if firstCalls() != 4 {
		t.Fatalf("after a failed trial: first got %d calls, want 4", firstCalls())
	}
	clk.t = clk.t.Add(30 * time.Second)
	firstDown.Store(false)
	if r := call(); r.Answered.Name != "a" || firstCalls() != 5 {
		t.Fatalf("a successful trial: answered %+v, first got %d calls", r.Answered, firstCalls())
	}
	firstDown.Store(true) // closed again: one failure does not open it
	call()
	call()
	if firstCalls() != 7 {
		t.Fatalf("closed again: first got %d calls, want 7", firstCalls())
	}
}

func TestEveryBreakerOpenStillTriesTheFirst(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	reply := func(openaitest.Request) openaitest.Reply {
		if down.Load() {
			return openaitest.Reply{Status: 503}
		}
		return openaitest.Reply{Content: "up"}
	}
	first, second := openaitest.New(t, reply), openaitest.New(t, reply)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := chain(t, fallback.Options{Threshold: 1, Now: clk.now},
		fallback.Entry{Name: "a", Model: openaiModel(t, "a", first.URL, 0)},
		fallback.Entry{Name: "b", Model: openaiModel(t, "b", second.URL, 0)})
	if _, err := c.Complete(context.Background(), ask()); err == nil {
		t.Fatal("no error while both are down")
	}
	down.Store(false)
	resp, err := c.Complete(context.Background(), ask()) // both breakers open
	if err != nil {
		t.Fatal(err)
	}
	if resp.Answered.Name != "a" || len(first.Requests()) != 2 || len(second.Requests()) != 1 {
		t.Errorf("answered %+v; first got %d, second %d", resp.Answered, len(first.Requests()), len(second.Requests()))
	}
}

func TestTakesPartOnlyWhatEveryModelTakes(t *testing.T) {
	c := chain(t, fallback.Options{}, fallback.Entry{Name: "a", Model: &refusing{}})
	if err := c.TakesPart(model.Part{Kind: model.PartImage, MediaType: "image/png"}); err == nil || !strings.Contains(err.Error(), "a takes no image parts") {
		t.Errorf("error %v", err)
	}
}

func TestNewRefusesAnEmptyChain(t *testing.T) {
	if _, err := fallback.New(nil, fallback.Options{}); err == nil {
		t.Error("no error for an empty chain")
	}
	if _, err := fallback.New([]fallback.Entry{{Name: "a"}}, fallback.Options{}); err == nil {
		t.Error("no error for a nil model")
	}
}
