package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// MaxEmbeddingInputs is the most texts one embeddings request carries; Embed splits a
// longer list into requests of at most this many, in order. OpenAI accepts up to 2048
// inputs, but many compatible servers (and OpenAI's per-request token limit) want far
// fewer.
const MaxEmbeddingInputs = 96

// EmbedderConfig is an embeddings endpoint. The zero value of each field means its
// default: the environment's (see NewEmbedder), then DefaultBaseURL, the model
// timeout and retries of chat (spec.DefaultModelTimeout, spec.DefaultModelRetries),
// and the model's native dimension.
type EmbedderConfig struct {
	Model      string        // the model name; else LLM_EMBEDDING_MODEL
	BaseURL    string        // else LLM_BASE_URL, OPENAI_BASE_URL, DefaultBaseURL
	APIKeyEnv  string        // the NAME of the key's variable; else LLM_API_KEY, OPENAI_API_KEY
	Dimensions int           // sent as "dimensions" when > 0; 0 takes the model's own
	Timeout    time.Duration // each attempt of one request; 0 is spec.DefaultModelTimeout
	Retries    *int          // nil is spec.DefaultModelRetries; 0 is a single attempt
}

// Embedder is a knowledge.Embedder on an OpenAI-compatible /embeddings endpoint. It
// shares chat's client: the same per-attempt timeout, retries (connection failures,
// 408, 409, 429, 5xx), MaxResponseBytes cap and key redaction. It is safe for
// concurrent use.
//
// Vectors are checked and then L2-normalised (OpenAI's already are; some compatible
// servers' are not), so that a dot product is the cosine, as knowledge.Embedder
// promises. A response is refused as a *model.Error when it has a different
// number of vectors than inputs, an index out of range or repeated, an empty vector,
// a NaN or infinite value, or a vector whose length differs from the configured
// dimension or from the first vector this Embedder ever received.
//
// The empty text is not sent (OpenAI refuses it); it gets the zero vector, as with
// knowledge.Local.
type Embedder struct {
	model string
	host  string
	dims  int          // configured; 0 when the model's own
	seen  atomic.Int64 // the dimension learned from the first response, when dims is 0

	m     *Model // for its redaction and error mapping (fail); never used for chat
	embed oai.EmbeddingService
}

var _ knowledge.Embedder = (*Embedder)(nil)

// NewEmbedder builds an Embedder from cfg, falling back to the environment seen
// through lookupEnv exactly as chat does (LLM_BASE_URL, OPENAI_BASE_URL;
// LLM_API_KEY, OPENAI_API_KEY unless cfg.APIKeyEnv names the variable, which then
// has no fallback). The model name falls back to LLM_EMBEDDING_MODEL, never to
// LLM_MODEL_NAME (a chat model is not an embeddings model) and never to a built-in
// name: an index silently built with a model nobody chose is worse than an error.
// The process environment is never read except through lookupEnv.
func NewEmbedder(cfg EmbedderConfig, lookupEnv func(string) (string, bool)) (*Embedder, error) {
	return buildEmbedder(cfg, lookupEnv)
}

// buildEmbedder is NewEmbedder with extra SDK options, which tests use to shorten
// the backoff.
func buildEmbedder(cfg EmbedderConfig, lookupEnv func(string) (string, bool), extra ...option.RequestOption) (*Embedder, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	name := cfg.Model
	if name == "" {
		name, _ = lookupEnv("LLM_EMBEDDING_MODEL")
	}
	if name == "" {
		return nil, errors.New("openai: no embeddings model name: set embeddings.model in the spec or LLM_EMBEDDING_MODEL")
	}
	if cfg.Dimensions < 0 {
		return nil, fmt.Errorf("openai: negative embeddings dimensions %d", cfg.Dimensions)
	}
	// build resolves the base URL, the key, the timeout and the retries, and makes
	// the capped, timed HTTP client; its chat service's options carry all of it.
	m, err := build(spec.Model{
		Name:      name,
		BaseURL:   cfg.BaseURL,
		APIKeyEnv: cfg.APIKeyEnv,
		Timeout:   spec.Duration{Duration: cfg.Timeout},
		Retries:   cfg.Retries,
	}, lookupEnv, extra...)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(m.baseURL)
	if err != nil { // build parsed it already
		return nil, fmt.Errorf("openai: base URL %q: %w", m.baseURL, err)
	}
	return &Embedder{
		model: name,
		host:  u.Host,
		dims:  cfg.Dimensions,
		m:     m,
		embed: oai.NewEmbeddingService(m.chat.Options...),
	}, nil
}

// ID is "openai:<base URL host>:<model>:dim=<n>" with the configured dimension, or
// "…:dim=native" when none is configured: the model then always answers in its own
// dimension, so the ID still names the vectors exactly, and it is the same before
// and after the first call (an index can be checked against it before anything is
// embedded). The learned number is Dimensions().
func (e *Embedder) ID() string {
	dim := "native"
	if e.dims > 0 {
		dim = strconv.Itoa(e.dims)
	}
	return "openai:" + e.host + ":" + e.model + ":dim=" + dim
}

// Dimensions is the configured dimension, else the one learned from the first
// response; 0 until then.
func (e *Embedder) Dimensions() int {
	if e.dims > 0 {
		return e.dims
	}
	return int(e.seen.Load())
}

// Model is the embeddings model name sent with each request.
func (e *Embedder) Model() string { return e.model }

// Embed returns one L2-normalised vector per text, in order, sending at most
// MaxEmbeddingInputs texts per request. Any failed request fails the whole call.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var send []int // indexes into texts of the non-empty ones
	for i, t := range texts {
		if t != "" {
			send = append(send, i)
		}
	}
	for start := 0; start < len(send); start += MaxEmbeddingInputs {
		idx := send[start:min(start+MaxEmbeddingInputs, len(send))]
		batch := make([]string, len(idx))
		for j, i := range idx {
			batch[j] = texts[i]
		}
		vecs, err := e.batch(ctx, batch)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = vecs[j]
		}
	}
	if len(send) < len(texts) {
		n := e.Dimensions()
		if n == 0 {
			return nil, &model.Error{Err: fmt.Errorf("embeddings %s: cannot give an empty text a vector before the model's dimension is known; set embeddings.dimensions", e.model)}
		}
		for i := range out {
			if out[i] == nil {
				out[i] = make([]float32, n)
			}
		}
	}
	return out, nil
}

// batch sends one request and returns its vectors ordered by their index.
func (e *Embedder) batch(ctx context.Context, texts []string) ([][]float32, error) {
	params := oai.EmbeddingNewParams{
		Model: e.model,
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		// encoding_format is left out (the SDK sends none): the API's default is
		// float. A server that answers in base64 anyway is decoded by the SDK.
	}
	if e.dims > 0 {
		params.Dimensions = oai.Int(int64(e.dims))
	}
	var httpRes *http.Response
	resp, err := e.embed.New(ctx, params, option.WithResponseInto(&httpRes))
	if err != nil {
		err = e.m.fail(ctx, err, httpRes)
		var me *model.Error
		if errors.As(err, &me) {
			me.Err = fmt.Errorf("embeddings %s: %w", e.model, me.Err)
		}
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, e.bad("%d vectors for %d inputs", len(resp.Data), len(texts))
	}
	// The dimension is learned only from a response that passes every check.
	want := e.Dimensions()
	first := false
	if want == 0 && len(resp.Data) > 0 {
		want, first = len(resp.Data[0].Embedding), true
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= int64(len(texts)) {
			return nil, e.bad("vector index %d is out of range for %d inputs", d.Index, len(texts))
		}
		if out[d.Index] != nil {
			return nil, e.bad("vector index %d appears twice", d.Index)
		}
		v, err := e.vector(d.Embedding, want, first)
		if err != nil {
			return nil, e.bad("vector %d: %v", d.Index, err)
		}
		out[d.Index] = v
	}
	if first && !e.seen.CompareAndSwap(0, int64(want)) && e.seen.Load() != int64(want) {
		// A concurrent call learned another dimension first.
		return nil, e.bad("%d dimensions, but the first vector had %d", want, e.seen.Load())
	}
	return out, nil
}

// vector checks one vector's values and length (want: the configured dimension,
// else the learned one, else — first — that of this response's first vector) and
// returns it L2-normalised.
func (e *Embedder) vector(raw []float64, want int, first bool) ([]float32, error) {
	switch {
	case len(raw) == 0:
		return nil, errors.New("empty or not a list of numbers")
	case len(raw) != want && e.dims > 0:
		return nil, fmt.Errorf("%d dimensions, want the configured %d", len(raw), e.dims)
	case len(raw) != want && first:
		return nil, fmt.Errorf("%d dimensions, but the response's first vector had %d", len(raw), want)
	case len(raw) != want:
		return nil, fmt.Errorf("%d dimensions, but the first vector had %d", len(raw), want)
	}
	v := make([]float32, len(raw))
	var sum float64
	for i, x := range raw {
		f := float32(x) // a finite float64 beyond float32's range becomes ±Inf
		if math.IsNaN(x) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("value %d is %v", i, x)
		}
		v[i] = f
		sum += float64(f) * float64(f)
	}
	if norm := math.Sqrt(sum); norm > 0 && !math.IsInf(norm, 0) {
		for i := range v {
			v[i] = float32(float64(v[i]) / norm)
		}
	}
	return v, nil
}

// bad is the error of a response that arrived but cannot be used.
func (e *Embedder) bad(format string, args ...any) error {
	msg := "embeddings " + e.model + ": bad response: " + fmt.Sprintf(format, args...)
	return &model.Error{Err: model.Redacted(msg, e.m.key, nil)}
}
