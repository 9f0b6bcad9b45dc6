package gemini

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/httpcap"

	"google.golang.org/genai"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// DefaultBaseURL is the Gemini API's server, used when neither the spec nor
// GOOGLE_GEMINI_BASE_URL names another.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// Model is a Gemini model on the Gemini API or Vertex AI. It holds no per-call
// state and is safe for concurrent use.
type Model struct {
	name      string
	baseURL   string
	vertex    bool
	key       string // only for redacting error messages; never printed
	temp      *float32
	maxTokens int
	timeout   time.Duration
	thinking  *genai.ThinkingConfig

	models *genai.Models
}

var (
	_ model.Model     = (*Model)(nil)
	_ model.PartTaker = (*Model)(nil)
)

// maxIdlePerHost is how many idle connections to the model host are kept: a
// server runs many agent calls to one host at once.
const maxIdlePerHost = 64

// New resolves the model's settings from the spec, falling back to the
// environment seen through env. env is the only source of environment: every
// setting the SDK would read from the process (the key, the backend, the project,
// the location, the base URL) is passed to it explicitly. The one exception is
// Vertex AI's credentials, found the SDK's default way (Application Default
// Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server).
func New(m spec.Model, env func(string) (string, bool)) (*Model, error) {
	return build(m, env, nil)
}

// settings are what New resolves before it builds the client.
type settings struct {
	vertex            bool
	key               string
	project, location string
	baseURL           string
}

// build is New with a hook on the retrying transport, which tests use to record
// the waits between attempts instead of sleeping.
func build(m spec.Model, env func(string) (string, bool), tune func(*retryTransport)) (*Model, error) {
	if m.Provider != spec.ProviderGemini {
		return nil, fmt.Errorf("gemini: provider %q is not gemini", m.Provider)
	}
	if m.Name == "" {
		return nil, errors.New("gemini: no model name: set model.name (gemini-2.5-flash, gemini-3-pro-preview, …)")
	}
	s, err := resolve(m, env)
	if err != nil {
		return nil, err
	}
	timeout, retries, err := limits(m)
	if err != nil {
		return nil, err
	}
	thinking, err := thinkingConfig(m.Reasoning)
	if err != nil {
		return nil, err
	}

	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if t, ok := http.DefaultTransport.(*http.Transport); ok { // not when a tracer wrapped it
		transport = t.Clone()
	}
	transport.MaxIdleConnsPerHost = maxIdlePerHost
	transport.MaxIdleConns = 4 * maxIdlePerHost
	retry := &retryTransport{
		base:    httpcap.Transport{Base: transport, Limit: MaxResponseBytes},
		retries: retries, timeout: timeout, backoff: defaultBackoff, maxWait: maxRetryWait, wait: sleep,
	}
	if tune != nil {
		tune(retry)
	}
	client := &http.Client{Transport: retry}

	cc := &genai.ClientConfig{
		Backend:    genai.BackendGeminiAPI,
		APIKey:     s.key,
		HTTPClient: client,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    s.baseURL,
			APIVersion: "v1beta",
		},
	}
	if s.vertex {
		cc.Backend, cc.APIKey, cc.Project, cc.Location = genai.BackendVertexAI, "", s.project, s.location
		cc.HTTPOptions.APIVersion = "v1beta1"
		// The SDK finds credentials itself only for a client it builds; this one
		// is ours (the caps and the retries), so the credentials go on it here.
		if err := cc.UseDefaultCredentials(); err != nil {
			return nil, fmt.Errorf("gemini: Vertex AI needs Google Cloud credentials (gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS): %v", err)
		}
	}
	c, err := genai.NewClient(context.Background(), cc)
	if err != nil {
		// The SDK's message quotes the whole ClientConfig, key included.
		return nil, errors.New("gemini: " + model.Redact(err.Error(), s.key))
	}
	out := &Model{
		name: m.Name, baseURL: s.baseURL, vertex: s.vertex, key: s.key,
		maxTokens: m.MaxTokens, timeout: timeout, thinking: thinking, models: c.Models,
	}
	if m.Temperature != nil {
		t := float32(*m.Temperature)
		out.temp = &t
	}
	return out, nil
}

// resolve finds the backend, the key or the project and location, and the base
// URL. A key variable the spec names explicitly has no fallback: sending another
// provider's key to this server would leak it.
func resolve(m spec.Model, env func(string) (string, bool)) (settings, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	lookup := func(names ...string) string {
		for _, n := range names {
			if v, ok := env(n); ok && v != "" {
				return v
			}
		}
		return ""
	}
	var s settings
	switch v := strings.ToLower(lookup("GOOGLE_GENAI_USE_VERTEXAI")); v {
	case "1", "true":
		s.vertex = true
	}
	if s.vertex {
		s.project = lookup("GOOGLE_CLOUD_PROJECT")
		s.location = lookup("GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION")
		if s.project == "" || s.location == "" {
			return s, errors.New("gemini: GOOGLE_GENAI_USE_VERTEXAI is set, so Vertex AI needs GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION (us-central1, global, …)")
		}
		s.baseURL = cmp.Or(m.BaseURL, lookup("GOOGLE_VERTEX_BASE_URL"), vertexBaseURL(s.location))
	} else {
		if m.APIKeyEnv != "" {
			s.key = lookup(m.APIKeyEnv)
			if s.key == "" {
				return s, fmt.Errorf("gemini: no API key: %s (model.api_key_env) is not set", m.APIKeyEnv)
			}
		} else if s.key = lookup("GEMINI_API_KEY", "GOOGLE_API_KEY"); s.key == "" {
			return s, errors.New("gemini: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY, or name the variable in model.api_key_env); for Vertex AI set GOOGLE_GENAI_USE_VERTEXAI=true")
		}
		s.baseURL = cmp.Or(m.BaseURL, lookup("GOOGLE_GEMINI_BASE_URL"), DefaultBaseURL)
	}
	if u, err := url.Parse(s.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("gemini: base URL %q is not an http(s) URL", s.baseURL)
	}
	return s, nil
}

// vertexBaseURL is Vertex AI's server for a location, as the SDK picks it.
func vertexBaseURL(location string) string {
	switch location {
	case "global":
		return "https://aiplatform.googleapis.com/"
	case "us", "eu":
		return fmt.Sprintf("https://aiplatform.%s.rep.googleapis.com/", location)
	}
	return fmt.Sprintf("https://%s-aiplatform.googleapis.com/", location)
}

func limits(m spec.Model) (time.Duration, int, error) {
	timeout := m.Timeout.Duration
	switch {
	case timeout < 0:
		return 0, 0, fmt.Errorf("gemini: negative timeout %s", timeout)
	case timeout == 0:
		timeout = spec.DefaultModelTimeout
	}
	retries := spec.DefaultModelRetries
	if m.Retries != nil {
		if *m.Retries < 0 {
			return 0, 0, fmt.Errorf("gemini: negative retries %d", *m.Retries)
		}
		retries = *m.Retries
	}
	if m.MaxTokens < 0 {
		return 0, 0, fmt.Errorf("gemini: negative max_tokens %d", m.MaxTokens)
	}
	return timeout, retries, nil
}

// thinkingConfig turns model.reasoning into Gemini's thinkingConfig. The API
// takes a level (Gemini 3) or a budget (Gemini 2.5), never both; thought
// summaries are asked for whenever reasoning is set, so that they can be shown
// and go back with their signatures.
func thinkingConfig(r *spec.ModelReasoning) (*genai.ThinkingConfig, error) {
	if r == nil {
		return nil, nil
	}
	if r.Effort != "" && r.BudgetTokens != 0 {
		return nil, errors.New("gemini: set model.reasoning.effort (Gemini 3's thinkingLevel) or model.reasoning.budget_tokens (Gemini 2.5's thinkingBudget), not both: the API refuses the two together")
	}
	tc := &genai.ThinkingConfig{IncludeThoughts: true}
	if r.BudgetTokens != 0 {
		if r.BudgetTokens < -1 || r.BudgetTokens > 1<<30 {
			return nil, fmt.Errorf("gemini: model.reasoning.budget_tokens %d is out of range", r.BudgetTokens)
		}
		b := int32(r.BudgetTokens)
		tc.ThinkingBudget = &b
	}
	switch r.Effort {
	case "":
	case spec.EffortMinimal:
		tc.ThinkingLevel = genai.ThinkingLevelMinimal
	case spec.EffortLow:
		tc.ThinkingLevel = genai.ThinkingLevelLow
	case spec.EffortMedium:
		tc.ThinkingLevel = genai.ThinkingLevelMedium
	case spec.EffortHigh:
		tc.ThinkingLevel = genai.ThinkingLevelHigh
	default:
		return nil, fmt.Errorf("gemini: unknown model.reasoning.effort %q", r.Effort)
	}
	return tc, nil
}

// Name is the model name sent with each request.
func (m *Model) Name() string { return m.name }

// BaseURL is the server the requests go to.
func (m *Model) BaseURL() string { return m.baseURL }

// Complete sends one generateContent request, or streamGenerateContent (SSE)
// when req.OnDelta is set.
func (m *Model) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	contents, cfg, err := m.request(req)
	if err != nil {
		return nil, err
	}
	var acc accumulator
	if req.OnDelta == nil {
		resp, err := m.models.GenerateContent(ctx, m.name, contents, cfg)
		if err != nil {
			return nil, m.fail(ctx, err)
		}
		acc.add(resp, nil)
	} else {
		for chunk, err := range m.models.GenerateContentStream(ctx, m.name, contents, cfg) {
			if err != nil {
				return nil, m.fail(ctx, err)
			}
			acc.add(chunk, req.OnDelta)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return acc.response()
}
