package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// embedRequest is the body of an /embeddings request.
type embedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	Dimensions     *int     `json:"dimensions"`
	EncodingFormat *string  `json:"encoding_format"`
}

// newEmbedServer is a server whose every reply is embeddings(reverse) after the
// given replies.
func newEmbedServer(t *testing.T, reverse bool, first ...http.HandlerFunc) *server {
	t.Helper()
	var s *server
	s = newServer(t, append(first, embeddings(&s, reverse))...)
	return s
}

// embeddings answers each input "tK" with the vector [K, 1] (and other inputs with
// [len, 1]) in the real wire format; reverse sends the data in reverse index order.
// The request body is the one *s recorded last (Embed sends its requests one at a
// time).
func embeddings(s **server, reverse bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		(*s).mu.Lock()
		body := (*s).requests[len((*s).requests)-1].body
		(*s).mu.Unlock()
		var req embedRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var data []string
		for i, in := range req.Input {
			k, err := strconv.Atoi(strings.TrimPrefix(in, "t"))
			if err != nil {
				k = len(in)
			}
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[%d,1]}`, i, k))
		}
		if reverse {
			slices.Reverse(data)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s],"model":"%s","usage":{"prompt_tokens":%d,"total_tokens":%d}}`,
			strings.Join(data, ","), req.Model, len(req.Input), len(req.Input))
	}
}

func newEmbedder(t *testing.T, s *server, edit ...func(*EmbedderConfig)) *Embedder {
	t.Helper()
	cfg := EmbedderConfig{Model: "emb-test", BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Retries: ptr(1)}
	for _, ed := range edit {
		ed(&cfg)
	}
	e, err := buildEmbedder(cfg, mapEnv(map[string]string{"TEST_KEY": testKey}), option.WithMaxRetryDelay(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "t" + strconv.Itoa(i)
	}
	return out
}

// checkOrder checks that vector i is [i, 1] normalised.
func checkOrder(t *testing.T, vecs [][]float32, n int) {
	t.Helper()
	if len(vecs) != n {
		t.Fatalf("%d vectors for %d texts", len(vecs), n)
	}
	for i, v := range vecs {
		if len(v) != 2 {
			t.Fatalf("vector %d has %d dimensions", i, len(v))
		}
		if got := math.Round(float64(v[0] / v[1])); got != float64(i) {
			t.Fatalf("vector %d belongs to text %v", i, got)
		}
		if norm := math.Hypot(float64(v[0]), float64(v[1])); math.Abs(norm-1) > 1e-5 {
			t.Errorf("vector %d has norm %v, want 1", i, norm)
		}
	}
}

func TestEmbedBatchesInOrder(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		t.Run(fmt.Sprint("reverse=", reverse), func(t *testing.T) {
			s := newEmbedServer(t, reverse)
			e := newEmbedder(t, s)
			n := 2*MaxEmbeddingInputs + 5
			vecs, err := e.Embed(context.Background(), texts(n))
			if err != nil {
				t.Fatal(err)
			}
			checkOrder(t, vecs, n)
			if s.count() != 3 {
				t.Fatalf("server saw %d requests, want 3", s.count())
			}
			var sizes []int
			for i := range 3 {
				r := s.request(t, i)
				if r.path != "/embeddings" {
					t.Errorf("path %q", r.path)
				}
				if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
					t.Errorf("Authorization %q", got)
				}
				var req embedRequest
				if err := json.Unmarshal(r.body, &req); err != nil {
					t.Fatal(err)
				}
				if req.Model != "emb-test" || req.Dimensions != nil || req.EncodingFormat != nil {
					t.Errorf("request %d: %s", i, r.body)
				}
				sizes = append(sizes, len(req.Input))
			}
			if !slices.Equal(sizes, []int{MaxEmbeddingInputs, MaxEmbeddingInputs, 5}) {
				t.Errorf("batch sizes %v", sizes)
			}
			if e.Dimensions() != 2 || e.ID() != "openai:"+strings.TrimPrefix(s.URL, "http://")+":emb-test:dim=native" {
				t.Errorf("Dimensions %d, ID %q", e.Dimensions(), e.ID())
			}
		})
	}
}

func TestEmbedDimensionsSent(t *testing.T) {
	s := newEmbedServer(t, false)
	e := newEmbedder(t, s, func(c *EmbedderConfig) { c.Dimensions = 2 })
	if e.Dimensions() != 2 || !strings.HasSuffix(e.ID(), ":emb-test:dim=2") {
		t.Errorf("Dimensions %d, ID %q", e.Dimensions(), e.ID())
	}
	if _, err := e.Embed(context.Background(), texts(3)); err != nil {
		t.Fatal(err)
	}
	if d := s.body(t, 0)["dimensions"]; d != 2.0 {
		t.Errorf("dimensions %v, want 2", d)
	}
}

func TestEmbedEmptyInputs(t *testing.T) {
	s := newEmbedServer(t, false)
	e := newEmbedder(t, s)
	if vecs, err := e.Embed(context.Background(), nil); err != nil || len(vecs) != 0 || s.count() != 0 {
		t.Fatalf("nil texts: %v, %v, %d requests", vecs, err, s.count())
	}
	if _, err := e.Embed(context.Background(), []string{""}); err == nil {
		t.Fatal("an empty text with an unknown dimension gave no error")
	}
	vecs, err := e.Embed(context.Background(), []string{"t0", "", "t2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vecs[1], []float32{0, 0}) || vecs[2][0] <= vecs[2][1] {
		t.Errorf("vectors %v", vecs)
	}
	if in := s.body(t, 0)["input"]; len(in.([]any)) != 2 {
		t.Errorf("input %v: the empty text was sent", in)
	}
}

func TestEmbedRetries(t *testing.T) {
	fail := reply(500, `{"error":{"message":"boom `+testKey+`","type":"server_error"}}`, "Retry-After", "0")

	s := newEmbedServer(t, false, fail)
	vecs, err := newEmbedder(t, s).Embed(context.Background(), texts(2))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vecs, 2)
	if s.count() != 2 {
		t.Errorf("server saw %d requests, want 2", s.count())
	}

	s = newServer(t, fail)
	_, err = newEmbedder(t, s).Embed(context.Background(), texts(2))
	me := modelError(t, err)
	if me.Status != 500 || !strings.Contains(err.Error(), "embeddings emb-test: Internal Server Error: boom [redacted]") {
		t.Errorf("error %v", err)
	}
	if s.count() != 2 {
		t.Errorf("server saw %d requests, want 2 (one retry)", s.count())
	}

	s = newServer(t, reply(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`"}}`))
	_, err = newEmbedder(t, s).Embed(context.Background(), texts(2))
	if me := modelError(t, err); me.Status != 401 || s.count() != 1 {
		t.Errorf("error %v after %d requests", err, s.count())
	}
}

func TestEmbedBadResponses(t *testing.T) {
	list := func(items ...string) http.HandlerFunc {
		return reply(200, `{"object":"list","data":[`+strings.Join(items, ",")+`],"model":"emb-test","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	}
	item := func(i int, vec string) string {
		return fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, i, vec)
	}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		dims    int
		want    string
	}{
		{"too few vectors", list(item(0, "[1,0]")), 0, "bad response: 1 vectors for 2 inputs"},
		{"too many vectors", list(item(0, "[1,0]"), item(1, "[1,0]"), item(2, "[1,0]")), 0, "bad response: 3 vectors for 2 inputs"},
		{"repeated index", list(item(0, "[1,0]"), item(0, "[1,0]")), 0, "vector index 0 appears twice"},
		{"index out of range", list(item(0, "[1,0]"), item(5, "[1,0]")), 0, "vector index 5 is out of range"},
		{"dimensions differ", list(item(0, "[1,0]"), item(1, "[1,0,0]")), 0, "vector 1: 3 dimensions, but the response's first vector had 2"},
		{"not the configured dimension", list(item(0, "[1,0,0]"), item(1, "[1,0,0]")), 2, "3 dimensions, want the configured 2"},
		{"empty vector", list(item(0, "[]"), item(1, "[1]")), 0, "vector 0: empty"},
		{"NaN", list(item(0, "[1,0]"), item(1, "[NaN,0]")), 0, "invalid character 'N'"},
		{"beyond float32", list(item(0, "[1,0]"), item(1, "[1e300,0]")), 0, "vector 1: value 0 is 1e+300"},
		{"garbage", reply(200, `<html>not json</html>`), 0, "model error: embeddings emb-test: "},
		{"no data", reply(200, `{"object":"list"}`), 0, "0 vectors for 2 inputs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler)
			e := newEmbedder(t, s, func(c *EmbedderConfig) { c.Dimensions = tt.dims })
			vecs, err := e.Embed(context.Background(), []string{"a", "b"})
			if err == nil {
				t.Fatalf("no error; vectors %v", vecs)
			}
			modelError(t, err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			if s.count() != 1 {
				t.Errorf("server saw %d requests; a bad 200 is not retried", s.count())
			}
			if e.Dimensions() != tt.dims {
				t.Errorf("Dimensions %d after a refused response, want %d", e.Dimensions(), tt.dims)
			}
		})
	}
}

// TestEmbedBase64: a server that answers in base64 (little-endian float32s, what the
// Python SDK asks for by default) is understood: the SDK decodes it.
func TestEmbedBase64(t *testing.T) {
	s := newServer(t, reply(200, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAAAAAgD8="}],"model":"m","usage":{}}`))
	vecs, err := newEmbedder(t, s).Embed(context.Background(), texts(1))
	if err != nil || len(vecs) != 1 || !slices.Equal(vecs[0], []float32{0, 1}) {
		t.Fatalf("vectors %v, error %v", vecs, err)
	}
}

// TestEmbedDimensionLearned: the first response fixes the dimension for later calls.
func TestEmbedDimensionLearned(t *testing.T) {
	var s *server
	s = newServer(t, embeddings(&s, false), reply(200, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2,3]}],"model":"m","usage":{}}`))
	e := newEmbedder(t, s)
	if e.Dimensions() != 0 {
		t.Errorf("Dimensions %d before any call", e.Dimensions())
	}
	id := e.ID()
	if _, err := e.Embed(context.Background(), texts(1)); err != nil {
		t.Fatal(err)
	}
	if e.Dimensions() != 2 || e.ID() != id {
		t.Errorf("Dimensions %d, ID %q (was %q)", e.Dimensions(), e.ID(), id)
	}
	_, err := e.Embed(context.Background(), texts(1))
	if err == nil || !strings.Contains(err.Error(), "3 dimensions, but the first vector had 2") {
		t.Errorf("error %v", err)
	}
}

func TestEmbedTimeout(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	s := newServer(t, hang)
	e := newEmbedder(t, s, func(c *EmbedderConfig) { c.Timeout = 80 * time.Millisecond })
	start := time.Now()
	_, err := e.Embed(context.Background(), texts(1))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %s", d)
	}
	modelError(t, err)
	if !strings.Contains(err.Error(), "no answer within the 80ms timeout") {
		t.Errorf("error %v", err)
	}
	if s.count() != 2 {
		t.Errorf("server saw %d requests, want 2 (the timed-out attempt is retried once)", s.count())
	}

	// The caller's own deadline is returned as it is.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	e = newEmbedder(t, s)
	if _, err := e.Embed(ctx, texts(1)); err != context.DeadlineExceeded {
		t.Errorf("error %v, want context.DeadlineExceeded", err)
	}
}

func TestNewEmbedderEnv(t *testing.T) {
	env := mapEnv(map[string]string{
		"LLM_EMBEDDING_MODEL": "text-embedding-3-small",
		"LLM_MODEL_NAME":      "gpt-4o-mini",
		"OPENAI_BASE_URL":     "http://emb.example:8080/v1",
		"OPENAI_API_KEY":      testKey,
	})
	e, err := NewEmbedder(EmbedderConfig{}, env)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "openai:emb.example:8080:text-embedding-3-small:dim=native" || e.m.key != testKey {
		t.Errorf("ID %q", e.ID())
	}
	for _, tt := range []struct {
		cfg  EmbedderConfig
		env  map[string]string
		want string
	}{
		{EmbedderConfig{}, map[string]string{"LLM_MODEL_NAME": "gpt-4o-mini"}, "no embeddings model name"},
		{EmbedderConfig{Model: "m", Dimensions: -1}, nil, "negative embeddings dimensions"},
		{EmbedderConfig{Model: "m", BaseURL: "ftp://x"}, nil, "not an http(s) URL"},
		{EmbedderConfig{Model: "m", Retries: ptr(-1)}, nil, "negative retries"},
	} {
		if _, err := NewEmbedder(tt.cfg, mapEnv(tt.env)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if e, err := NewEmbedder(EmbedderConfig{Model: "m"}, nil); err != nil || e.ID() != "openai:api.openai.com:m:dim=native" {
		t.Errorf("defaults: %v, %v", e, err)
	}
}
