package openai

import (
	"bufio"
	"bytes"
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
)

// responsesAPI is a fake of the Responses API that replays recorded bodies
// (testdata/responses/*.sse streamed byte for byte, *.json whole) and checks each
// request against what it answered before, as the real API does with store:
// false: every reasoning item sent back must be one it made, byte for byte; a
// function_call that followed a reasoning item must come after that item; a
// function_call_output must answer a function_call of the same input. A request
// that breaks a rule gets OpenAI's 400 error body.
type responsesAPI struct {
	*httptest.Server
	t       *testing.T
	replies []string // testdata files, one per request; the last repeats

	mu        sync.Mutex
	bodies    [][]byte
	reasoning map[string][]byte // reasoning item id → the item as sent (compacted)
	after     map[string]string // function_call item id → the reasoning item before it
}

func newResponsesAPI(t *testing.T, replies ...string) *responsesAPI {
	t.Helper()
	a := &responsesAPI{t: t, replies: replies, reasoning: map[string][]byte{}, after: map[string]string{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *responsesAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.bodies)
	a.bodies = append(a.bodies, body)
	if r.URL.Path != "/responses" {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (POST %s)", r.URL.Path), "")
		return
	}
	if msg, param := a.check(body); msg != "" {
		apiError(w, http.StatusBadRequest, msg, param)
		return
	}
	name := a.replies[min(n, len(a.replies)-1)]
	reply, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		a.t.Errorf("fixture: %v", err)
		apiError(w, http.StatusInternalServerError, "no fixture", "")
		return
	}
	a.learn(name, reply)
	if strings.HasSuffix(name, ".sse") {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Write(reply)
}

// apiError writes OpenAI's error body.
func apiError(w http.ResponseWriter, status int, msg, param string) {
	var p any
	if param != "" {
		p = param
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": p, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

type wireItem struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	CallID string `json:"call_id"`
}

// check returns the error message (and its param) the real API gives a request
// that breaks one of its rules, or "".
func (a *responsesAPI) check(body []byte) (string, string) {
	var req struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "We could not parse the JSON body of your request.", ""
	}
	seen := map[string]bool{}  // item ids of this input so far
	calls := map[string]bool{} // call ids of this input's function calls so far
	for i, raw := range req.Input {
		var it wireItem
		json.Unmarshal(raw, &it)
		switch it.Type {
		case "reasoning":
			want, ok := a.reasoning[it.ID]
			var got bytes.Buffer
			json.Compact(&got, raw)
			if !ok || !bytes.Equal(got.Bytes(), want) {
				return fmt.Sprintf("The encrypted content for item %s could not be verified.", it.ID), fmt.Sprintf("input[%d]", i)
			}
		case "function_call":
			if rs, ok := a.after[it.ID]; ok && !seen[rs] {
				return fmt.Sprintf("Item '%s' of type 'function_call' was provided without its required 'reasoning' item: '%s'.", it.ID, rs), "input"
			}
			calls[it.CallID] = true
		case "function_call_output":
			if !calls[it.CallID] {
				return fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID), "input"
			}
		}
		if it.ID != "" {
			seen[it.ID] = true
		}
	}
	return "", ""
}

// learn notes the reasoning items of a reply and the function calls that
// followed each.
func (a *responsesAPI) learn(name string, reply []byte) {
	var output []json.RawMessage
	if strings.HasSuffix(name, ".sse") {
		sc := bufio.NewScanner(bytes.NewReader(reply))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var ev struct {
				Type string          `json:"type"`
				Item json.RawMessage `json:"item"`
			}
			if ok && json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.output_item.done" {
				output = append(output, ev.Item)
			}
		}
	} else {
		var resp struct {
			Output []json.RawMessage `json:"output"`
		}
		json.Unmarshal(reply, &resp)
		output = resp.Output
	}
	last := ""
	for _, raw := range output {
		var it wireItem
		json.Unmarshal(raw, &it)
		switch it.Type {
		case "reasoning":
			var b bytes.Buffer
			json.Compact(&b, raw)
			a.reasoning[it.ID] = b.Bytes()
			last = it.ID
		case "function_call":
			if last != "" {
				a.after[it.ID] = last
			}
		}
	}
}

func (a *responsesAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bodies)
}

// body is request i's JSON body, decoded.
func (a *responsesAPI) body(t *testing.T, i int) map[string]any {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if i >= len(a.bodies) {
		t.Fatalf("the server saw %d requests, want request %d", len(a.bodies), i)
	}
	var m map[string]any
	if err := json.Unmarshal(a.bodies[i], &m); err != nil {
		t.Fatalf("request %d: %v", i, err)
	}
	return m
}

// fixtureItems are the output items of a recorded reply as its last event or
// its body lists them, compacted.
func fixtureItems(t *testing.T, name string) []json.RawMessage {
	t.Helper()
	reply, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".sse") {
		lines := strings.Split(strings.TrimSpace(string(reply)), "\n")
		reply = []byte(strings.TrimPrefix(lines[len(lines)-1], "data: "))
	}
	var v struct {
		Output   []json.RawMessage `json:"output"`
		Response struct {
			Output []json.RawMessage `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(reply, &v); err != nil {
		t.Fatal(err)
	}
	out := append(v.Output, v.Response.Output...)
	for i, raw := range out {
		var b bytes.Buffer
		json.Compact(&b, raw)
		out[i] = b.Bytes()
	}
	return out
}
