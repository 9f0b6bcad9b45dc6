package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentrun/agentrun/internal/httpcap"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// DefaultBaseURL is used when neither the spec nor ANTHROPIC_BASE_URL names a server.
const DefaultBaseURL = "https://api.anthropic.com/"

// DefaultKeyEnv is the variable the API key is read from when the spec names none.
const DefaultKeyEnv = "ANTHROPIC_API_KEY"

// DefaultMaxTokens is the output cap of a call when neither the spec nor the run
// sets one: the Messages API requires max_tokens on every request.
const DefaultMaxTokens = 8192

// MinThinkingBudget is the smallest budget_tokens the API takes.
const MinThinkingBudget = 1024

// maxPauses bounds how often a pause_turn answer is sent back to be continued
// within one Complete.
const maxPauses = 3

// maxIdlePerHost is how many idle connections to the model host are kept.
const maxIdlePerHost = 64

// Model is a Claude model on Anthropic's Messages API. It holds no per-call state
// and is safe for concurrent use.
type Model struct {
	name        string
	baseURL     string
	key         string // only for redacting error messages; never printed
	temperature *float64
	maxTokens   int // 0: DefaultMaxTokens (plus the thinking budget)
	budget      int // extended thinking's budget_tokens; 0: no thinking
	cache       bool
	timeout     time.Duration

	msgs sdk.MessageService
	// stream replaces the service's client for streamed requests: its attempts are
	// timed by completeStream, so that a long answer may stream.
	stream *http.Client
}

var (
	_ model.Model     = (*Model)(nil)
	_ model.PartTaker = (*Model)(nil)
)

// New resolves the model's settings from the spec, falling back to the environment
// seen through env: the key from model.api_key_env (default ANTHROPIC_API_KEY),
// the server from model.base_url or ANTHROPIC_BASE_URL. env is the only source of
// environment: the SDK's own reading of ANTHROPIC_* variables, profiles and
// OpenTelemetry settings is bypassed. A missing API key is not an error here; the
// server answers 401.
func New(m spec.Model, env func(string) (string, bool)) (*Model, error) {
	return build(m, env)
}

// build is New with extra SDK options, which tests use.
func build(m spec.Model, env func(string) (string, bool), extra ...option.RequestOption) (*Model, error) {
	if m.Provider != spec.ProviderAnthropic {
		return nil, fmt.Errorf("anthropic: provider %q is not anthropic", m.Provider)
	}
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	lookup := func(name string) string {
		v, _ := env(name)
		return v
	}
	if m.Name == "" {
		return nil, errors.New("anthropic: no model name: set model.name (claude-sonnet-4-5, …)")
	}
	baseURL := cmp.Or(m.BaseURL, lookup("ANTHROPIC_BASE_URL"), DefaultBaseURL)
	if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q is not an http(s) URL", baseURL)
	}
	// A key variable the spec names has no fallback: another variable's key
	// would go to a server it was not meant for.
	key := lookup(cmp.Or(m.APIKeyEnv, DefaultKeyEnv))

	timeout := m.Timeout.Duration
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("anthropic: negative timeout %s", timeout)
	case timeout == 0:
		timeout = spec.DefaultModelTimeout
	}
	retries := spec.DefaultModelRetries
	if m.Retries != nil {
		if *m.Retries < 0 {
			return nil, fmt.Errorf("anthropic: negative retries %d", *m.Retries)
		}
		retries = *m.Retries
	}
	if m.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: negative max_tokens %d", m.MaxTokens)
	}
	budget, err := thinkingBudget(m)
	if err != nil {
		return nil, err
	}

	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if t, ok := http.DefaultTransport.(*http.Transport); ok { // not when a tracer wrapped it
		transport = t.Clone()
	}
	transport.ResponseHeaderTimeout = timeout
	transport.MaxIdleConnsPerHost = maxIdlePerHost
	transport.MaxIdleConns = 4 * maxIdlePerHost
	capped := httpcap.Transport{Base: transport, Limit: MaxResponseBytes}

	// sdk.NewClient would read ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
	// ANTHROPIC_PROFILE, federation variables, ANTHROPIC_BASE_URL and
	// ANTHROPIC_CUSTOM_HEADERS from the process; building the service directly
	// takes only the options given here. The SDK's own OpenTelemetry spans are
	// off: the runtime traces model calls itself, and the SDK would read its
	// ANTHROPIC_OPEN_TELEMETRY* settings from the process.
	msgs := sdk.NewMessageService(append([]option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(key),
		option.WithHTTPClient(&http.Client{Transport: capped, Timeout: timeout}),
		option.WithMaxRetries(retries),
		option.WithoutOpenTelemetry(),
		option.WithOpenTelemetryPropagation(false),
		option.WithOpenTelemetryTracesContentMode(option.OpenTelemetryContentModeMetadataOnly),
	}, extra...)...)
	return &Model{
		name:        m.Name,
		baseURL:     baseURL,
		key:         key,
		temperature: m.Temperature,
		maxTokens:   m.MaxTokens,
		budget:      budget,
		cache:       m.Cache == nil || *m.Cache,
		timeout:     timeout,
		msgs:        msgs,
		stream:      &http.Client{Transport: capped},
	}, nil
}

// thinkingBudget checks model.reasoning.budget_tokens against what the API takes.
func thinkingBudget(m spec.Model) (int, error) {
	if m.Reasoning == nil || m.Reasoning.BudgetTokens == 0 {
		return 0, nil
	}
	b := m.Reasoning.BudgetTokens
	switch {
	case b < MinThinkingBudget:
		return 0, fmt.Errorf("anthropic: model.reasoning.budget_tokens %d is below %d, the least extended thinking takes", b, MinThinkingBudget)
	case m.MaxTokens != 0 && b >= m.MaxTokens:
		return 0, fmt.Errorf("anthropic: model.reasoning.budget_tokens %d must be below model.max_tokens %d (thinking counts toward it)", b, m.MaxTokens)
	case m.Temperature != nil && *m.Temperature != 1:
		return 0, errors.New("anthropic: model.temperature cannot be set with extended thinking (model.reasoning.budget_tokens)")
	}
	return b, nil
}

// Name is the model name sent with each request.
func (m *Model) Name() string { return m.name }

// BaseURL is the server the requests go to.
func (m *Model) BaseURL() string { return m.baseURL }

// Complete sends one Messages API request, streamed when req.OnDelta is set. An
// answer paused by the server (pause_turn) is sent back to be continued, at most
// maxPauses times, and the parts are returned as one answer.
func (m *Model) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	p, plan, err := m.params(req)
	if err != nil {
		return nil, err
	}
	var total turn
	paused := -1 // index in p.Messages of the paused answer sent back
	for pauses := 0; ; pauses++ {
		var t *turn
		if req.OnDelta != nil {
			t, err = m.completeStream(ctx, p, req.OnDelta)
		} else {
			t, err = m.completeOnce(ctx, p)
		}
		if err != nil {
			var me *model.Error
			if errors.As(err, &me) {
				me.Usage.Add(total.usage)
			}
			return nil, err
		}
		total.merge(t)
		if t.stop != "pause_turn" || pauses == maxPauses {
			break
		}
		paused = continuePaused(&p, paused, t.raw)
	}
	return plan.response(&total)
}

// completeOnce sends one unstreamed request.
func (m *Model) completeOnce(ctx context.Context, p sdk.MessageNewParams) (*turn, error) {
	var httpRes *http.Response
	// The request timeout also stops the SDK from refusing a large max_tokens
	// unstreamed: model.timeout bounds the attempt either way.
	msg, err := m.msgs.New(ctx, p, option.WithRequestTimeout(m.timeout), option.WithResponseInto(&httpRes))
	if err != nil {
		return nil, m.fail(ctx, err, httpRes)
	}
	if msg.Type != "message" {
		// Another API's 200 (an OpenAI-compatible server at model.base_url) reads as
		// an empty message: an answer of nothing, unless it is refused here.
		return nil, &model.Error{Err: fmt.Errorf("the reply is not a Messages API message (type %q): is model.base_url an Anthropic API?", msg.Type), Refused: true}
	}
	return turnOf(msg), nil
}
