package gemini

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// testKey is the API key the fake server accepts.
const testKey = "AIzaSyTEST-0123456789abcdefghijklmnopq"

// reply is one answer of the fake server: a testdata file sent byte for byte, or
// a literal body.
type reply struct {
	status int
	header map[string]string
	file   string
	body   string
}

// seen is a request the fake server received.
type seen struct {
	path, query string
	header      http.Header
	body        []byte
}

// fakeGemini replays recorded answers and checks each request the way the Gemini
// API does: the API key, and — for a tool round — that every function call goes
// back with the thought signature it came with (byte for byte) and that a user
// turn with one functionResponse per call follows every model turn that made
// calls. A request that fails a check gets Google's 400 INVALID_ARGUMENT.
type fakeGemini struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []seen
	// issued are the signatures the server sent: on calls, by the call
	// (name and arguments), and all of them.
	callSigs map[string]string
	sigs     map[string]bool
}

func newFake(t *testing.T, replies ...reply) *fakeGemini {
	f := &fakeGemini{t: t, replies: replies, callSigs: map[string]string{}, sigs: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// then queues more replies.
func (f *fakeGemini) then(r ...reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, r...)
}

func (f *fakeGemini) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fakeGemini) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: body})
	f.mu.Unlock()
	if r.Header.Get("x-goog-api-key") != testKey {
		f.send(w, reply{status: 400, file: "error_api_key_invalid.json"})
		return
	}
	if msg := f.check(body); msg != "" {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}})
		f.send(w, reply{status: 400, body: string(b)})
		return
	}
	f.mu.Lock()
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected request %s", r.URL.Path)
		http.Error(w, "no reply left", http.StatusInternalServerError)
		return
	}
	next := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()
	f.send(w, next)
}

func (f *fakeGemini) send(w http.ResponseWriter, rp reply) {
	data := []byte(rp.body)
	if rp.file != "" {
		var err error
		if data, err = os.ReadFile(filepath.Join("testdata", rp.file)); err != nil {
			f.t.Error(err)
		}
	}
	if rp.status == 0 || rp.status == 200 {
		f.learn(data)
	}
	ct := "application/json; charset=UTF-8"
	if strings.HasSuffix(rp.file, ".sse") {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(max(rp.status, 200))
	w.Write(data)
}

type wirePart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	Signature    string  `json:"thoughtSignature"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

type wireContent struct {
	Role  string     `json:"role"`
	Parts []wirePart `json:"parts"`
}

// callKey identifies a call by its name and its arguments (compacted).
func callKey(name string, args json.RawMessage) string {
	var v any
	json.Unmarshal(args, &v)
	b, _ := json.Marshal(v)
	return name + " " + string(b)
}

// learn records the signatures of an answer (a JSON body or an SSE stream).
func (f *fakeGemini) learn(data []byte) {
	var bodies [][]byte
	if bytes.HasPrefix(data, []byte("data:")) {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				bodies = append(bodies, rest)
			}
		}
	} else {
		bodies = [][]byte{data}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bodies {
		var resp struct {
			Candidates []struct {
				Content wireContent `json:"content"`
			} `json:"candidates"`
		}
		json.Unmarshal(b, &resp)
		for _, c := range resp.Candidates {
			for _, p := range c.Content.Parts {
				if p.Signature == "" {
					continue
				}
				f.sigs[p.Signature] = true
				if p.FunctionCall != nil {
					f.callSigs[callKey(p.FunctionCall.Name, p.FunctionCall.Args)] = p.Signature
				}
			}
		}
	}
}

// check is what the API says about a request's contents, or "" when it takes it.
func (f *fakeGemini) check(body []byte) string {
	var req struct {
		Contents []wireContent `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "Invalid JSON payload received. " + err.Error()
	}
	if len(req.Contents) == 0 {
		return "* GenerateContentRequest.contents: contents is not specified\n"
	}
	var shape struct {
		Contents []struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	json.Unmarshal(body, &shape)
	for i, c := range shape.Contents {
		if len(c.Parts) == 0 {
			return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.\n", i)
		}
		for j, p := range c.Parts {
			delete(p, "thoughtSignature")
			delete(p, "thought")
			if len(p) == 0 {
				return fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].data: required oneof field 'data' must have one initialized field\n", i, j)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range req.Contents {
		if c.Role != "model" {
			continue
		}
		var names []string
		for j, p := range c.Parts {
			if p.Signature != "" && !f.sigs[p.Signature] {
				return "Corrupted thought signature."
			}
			if p.FunctionCall == nil {
				continue
			}
			names = append(names, p.FunctionCall.Name)
			if want, ok := f.callSigs[callKey(p.FunctionCall.Name, p.FunctionCall.Args)]; ok && p.Signature != want {
				if p.Signature == "" {
					return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.FunctionCall.Name, j+1)
				}
				return "Corrupted thought signature."
			}
		}
		if len(names) == 0 {
			continue
		}
		var got []string
		if i+1 < len(req.Contents) && req.Contents[i+1].Role == "user" {
			for _, p := range req.Contents[i+1].Parts {
				if p.FunctionResponse != nil {
					got = append(got, p.FunctionResponse.Name)
				}
			}
		}
		if len(got) != len(names) {
			return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
		}
		if strings.Join(got, ",") != strings.Join(names, ",") {
			return "Please ensure that function response turn comes immediately after a function call turn. And the function response names match the function call names."
		}
	}
	return ""
}

// testModel is a model on the fake server; waits records the waits between
// attempts, which are not slept.
func testModel(t *testing.T, f *fakeGemini, m spec.Model) (*Model, *[]time.Duration) {
	t.Helper()
	m.Provider = spec.ProviderGemini
	if m.Name == "" {
		m.Name = "gemini-3-pro-preview"
	}
	m.BaseURL = f.srv.URL
	var waits []time.Duration
	env := func(k string) (string, bool) {
		if k == "GEMINI_API_KEY" {
			return testKey, true
		}
		return "", false
	}
	g, err := build(m, env, func(rt *retryTransport) {
		rt.wait = func(ctx context.Context, d time.Duration) bool { waits = append(waits, d); return ctx.Err() == nil }
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, &waits
}

// jsonPath reads a value from a decoded JSON body by keys and indices.
func jsonPath(t *testing.T, body []byte, path ...any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("request body: %v", err)
	}
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var _ = model.RoleUser

// stall is a handler that streams one chunk and then waits until block closes.
func stall(block chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n")
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
}
