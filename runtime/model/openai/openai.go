package openai

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentrun/agentrun/internal/httpcap"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// DefaultBaseURL is used when neither the spec nor the environment names a server.
const DefaultBaseURL = "https://api.openai.com/v1/"

// Model is a chat model on an OpenAI-compatible server. It holds no per-call state
// and is safe for concurrent use.
type Model struct {
	name        string
	baseURL     string
	key         string // only for redacting error messages; never printed
	temperature *float64
	maxTokens   int
	timeout     time.Duration
	// api is the wire protocol: chat completions unless it is APIResponses.
	api spec.ModelAPI
	// effort is the reasoning effort to ask for; "" leaves it to the model.
	effort string

	chat      oai.ChatCompletionService
	responses responses.ResponseService
	// stream replaces the service's client for streamed requests: it bounds only
	// the wait for the response headers, because a long answer may stream for
	// minutes (an idle timer guards the body instead).
	stream *http.Client
}

var _ model.Model = (*Model)(nil)

// New resolves the model's settings from the spec, falling back to the environment
// seen through env (LLM_* first, then OPENAI_*). env is the only source of
// environment: the SDK's own reading of OPENAI_* variables is bypassed. A missing
// API key is not an error here; a server that needs one answers 401.

// maxIdlePerHost is how many idle connections to the model host are kept.
const maxIdlePerHost = 64

func New(m spec.Model, env func(string) (string, bool)) (*Model, error) {
	return build(m, env)
}

// build is New with extra SDK options, which tests use to shorten the backoff.
func build(m spec.Model, env func(string) (string, bool), extra ...option.RequestOption) (*Model, error) {
	if m.Provider != "" && m.Provider != spec.ProviderOpenAI {
		return nil, fmt.Errorf("openai: provider %q is not openai", m.Provider)
	}
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

	name := cmp.Or(m.Name, lookup("LLM_MODEL_NAME"))
	if name == "" {
		return nil, errors.New("openai: no model name: set model.name in the spec or LLM_MODEL_NAME")
	}
	baseURL := cmp.Or(m.BaseURL, lookup("LLM_BASE_URL", "OPENAI_BASE_URL"), DefaultBaseURL)
	if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL", baseURL)
	}
	// A key variable the spec names explicitly has no fallback: sending another
	// provider's key to this server would leak it.
	var key string
	if m.APIKeyEnv != "" {
		key = lookup(m.APIKeyEnv)
	} else {
		key = lookup("LLM_API_KEY", "OPENAI_API_KEY")
	}

	timeout := m.Timeout.Duration
	switch {
	case timeout < 0:
		return nil, fmt.Errorf("openai: negative timeout %s", timeout)
	case timeout == 0:
		timeout = spec.DefaultModelTimeout
	}
	retries := spec.DefaultModelRetries
	if m.Retries != nil {
		if *m.Retries < 0 { // option.WithMaxRetries panics on a negative value
			return nil, fmt.Errorf("openai: negative retries %d", *m.Retries)
		}
		retries = *m.Retries
	}
	if m.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: negative max_tokens %d", m.MaxTokens)
	}

	// A timeout of the http.Client, unlike option.WithRequestTimeout, is an
	// attempt failure the SDK retries.
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if t, ok := http.DefaultTransport.(*http.Transport); ok { // not when a tracer wrapped it
		transport = t.Clone()
	}
	transport.ResponseHeaderTimeout = timeout
	// A server runs many agent calls to one model host at once: keep their
	// connections (Go keeps 2 idle per host by default, so each call past them
	// would open and close one).
	transport.MaxIdleConnsPerHost = maxIdlePerHost
	transport.MaxIdleConns = 4 * maxIdlePerHost
	capped := httpcap.Transport{Base: transport, Limit: MaxResponseBytes}
	plain := &http.Client{Transport: capped, Timeout: timeout}
	stream := &http.Client{Transport: capped}

	// openai.NewClient would first read OPENAI_API_KEY, OPENAI_BASE_URL,
	// OPENAI_ORG_ID, OPENAI_PROJECT_ID and OPENAI_CUSTOM_HEADERS from the process;
	// building the services directly takes only the options given here.
	opts := append([]option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(key),
		option.WithHTTPClient(plain),
		option.WithMaxRetries(retries),
	}, extra...)
	out := &Model{
		name:        name,
		baseURL:     baseURL,
		key:         key,
		temperature: m.Temperature,
		maxTokens:   m.MaxTokens,
		timeout:     timeout,
		stream:      stream,
	}
	if m.Reasoning != nil {
		out.effort = string(m.Reasoning.Effort)
	}
	switch m.API {
	case "", spec.APIChat:
		out.api = spec.APIChat
		out.chat = oai.NewChatCompletionService(opts...)
	case spec.APIResponses:
		out.api = spec.APIResponses
		out.responses = responses.NewResponseService(opts...)
	default:
		return nil, fmt.Errorf("openai: unknown api %q (want chat or responses)", m.API)
	}
	return out, nil
}

// Name is the model name sent with each request.
func (m *Model) Name() string { return m.name }

// BaseURL is the server the requests go to.
func (m *Model) BaseURL() string { return m.baseURL }

// Complete sends one request, streamed when req.OnDelta is set: a chat
// completion, or a response of the Responses API when the spec says api: responses.
func (m *Model) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if err := m.checkParts(req.Messages); err != nil {
		return nil, err
	}
	if m.api == spec.APIResponses {
		return m.completeResponses(ctx, req)
	}
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	if req.OnDelta != nil {
		return m.completeStream(ctx, params, req.OnDelta)
	}
	var httpRes *http.Response
	resp, err := m.chat.New(ctx, params, option.WithResponseInto(&httpRes))
	if err != nil {
		return nil, m.fail(ctx, err, httpRes)
	}
	if len(resp.Choices) == 0 {
		return nil, &model.Error{Err: errors.New("the response has no choices")}
	}
	choice := resp.Choices[0]
	for _, c := range resp.Choices {
		if c.Index == 0 {
			choice = c
			break
		}
	}
	msg := model.Message{Role: model.RoleAssistant, Content: choice.Message.Content,
		Reasoning: reasoningOf(choice.Message.JSON.ExtraFields)}
	if msg.Content == "" {
		msg.Content = choice.Message.Refusal // a refusal is the model's answer too
	}
	for _, tc := range choice.Message.ToolCalls {
		// Read the fields directly rather than through AsFunction/ToParam: servers
		// that omit "type" still mean a function call.
		msg.ToolCalls = append(msg.ToolCalls, toolCall(tc.ID, tc.Function.Name, tc.Function.Arguments, callExtra(tc.RawJSON())))
	}
	out := &model.Response{
		Message:      msg,
		FinishReason: model.FinishReason(choice.FinishReason),
		Usage:        usage(resp.Usage),
		Model:        resp.Model,
	}
	if err := checkTruncated(out); err != nil {
		return nil, err
	}
	return out, nil
}
