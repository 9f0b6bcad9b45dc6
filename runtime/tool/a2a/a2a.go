package a2a

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/google/uuid"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// MaxResponse is the most a remote agent's response may hold, its card or a
// whole stream of events: a bigger one fails the call.
const MaxResponse = 8 << 20

// cancelTimeout bounds the tasks/cancel sent for a call that ended first: the
// call's own context is over by then.
const cancelTimeout = 5 * time.Second

// Agent is the tool that sends an agents entry's tasks to a remote A2A agent.
// It is safe for concurrent calls; the card is read at the first call.
type Agent struct {
	name     string
	base     *url.URL // the entry's url: its scheme and host are the only ones reached
	cardBase string   // what the card resolver joins cardPath to
	cardPath string
	http     *http.Client
	urls     *regexp.Regexp // the agent's URLs in an error, shown as scheme://host only

	mu      sync.Mutex
	client  *a2aclient.Client // nil until a call read the card
	streams bool              // the card says the agent streams
}

var (
	_ tool.Tool       = (*Agent)(nil)
	_ tool.UserPasser = (*Agent)(nil)
)

// New is the tool of the agents entry name, with cfg its a2a settings and token
// the value of its auth.token_env ("" without auth).
func New(name string, cfg *spec.A2AAgent, token string) (*Agent, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
		return nil, fmt.Errorf("agent %s: a2a.url is not an http(s) URL with a host and no credentials", name)
	}
	a := &Agent{name: name, base: u, cardBase: cfg.URL, cardPath: spec.A2ACardPath,
		urls: regexp.MustCompile(regexp.QuoteMeta(u.Scheme+"://"+u.Host) + `[^\s"']*`)}
	if strings.HasSuffix(u.Path, ".json") {
		a.cardPath = ""
	}
	t := &transport{base: http.DefaultTransport, scheme: u.Scheme, host: strings.ToLower(u.Host), limit: MaxResponse}
	if cfg.Auth != nil {
		t.header, t.value = "Authorization", tool.NewCredential("Bearer "+token)
		if cfg.Auth.Header != "" {
			t.header, t.value = cfg.Auth.Header, tool.NewCredential(token)
		}
	}
	a.http = &http.Client{Transport: t} // no timeout of its own: each call's context bounds it
	return a, nil
}

// PassesUser is false: the remote agent gets the model's task and the entry's
// token, nothing of the user.
func (a *Agent) PassesUser() bool { return false }

// Host is the host the agent is reached on, as events and traces name it.
func (a *Agent) Host() string { return a.base.Host }

// Call sends the task to the remote agent and waits for its last state.
func (a *Agent) Call(ctx context.Context, in tool.Input) (string, error) {
	task, _ := in.Args[spec.SubAgentTaskParam].(string)
	if strings.TrimSpace(task) == "" {
		return "", errors.New("the task is empty: say what the agent should do")
	}
	ctx, over := withLimit(ctx)
	c, stream, err := a.connect(ctx)
	if err != nil {
		return "", a.failure(ctx, over, nil, err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(task))
	msg.ContextID = contextOf(in.Run, a.name)
	f := &follow{host: a.base.Host, in: in}
	if stream {
		err = a.stream(ctx, c, &a2a.SendMessageRequest{Message: msg}, f)
	} else {
		err = a.send(ctx, c, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}, f)
	}
	if err == nil && !f.settled() {
		err = a.poll(ctx, c, f)
	}
	if err != nil {
		a.cancel(ctx, c, f)
		return "", a.failure(ctx, over, c, err)
	}
	return a.outcome(ctx, c, f)
}

// contextOf is the remote context of a run's calls of one agent: the same for
// every call of the run, so the remote agent sees them as one conversation, and
// derived from nothing it could read back (a run's id is random). A call outside
// a run gets a context of its own.
func contextOf(run, agent string) string {
	if run == "" {
		return a2a.NewContextID()
	}
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("agentrun:a2a:"+run+"\x00"+agent)).String()
}

// connect is the client of the agent's card, reading the card at the first call.
// A card that cannot be read is not remembered: the next call tries again.
func (a *Agent) connect(ctx context.Context) (*a2aclient.Client, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil {
		return a.client, a.streams, nil
	}
	card, err := (&agentcard.Resolver{Client: a.http, CardParser: parseCard}).Resolve(ctx, a.cardBase, agentcard.WithPath(a.cardPath))
	if err != nil {
		return nil, false, fmt.Errorf("its agent card could not be read: %w", err)
	}
	var here, elsewhere []*a2a.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if u, err := url.Parse(iface.URL); err == nil && u.Scheme == a.base.Scheme && strings.EqualFold(u.Host, a.base.Host) {
			here = append(here, iface)
		} else {
			elsewhere = append(elsewhere, iface)
		}
	}
	if len(here) == 0 {
		names := make([]string, len(elsewhere))
		for i, iface := range elsewhere {
			names[i] = iface.URL
		}
		return nil, false, fmt.Errorf("its agent card names no endpoint on %s://%s (it names %s): agentrun reaches the agent only there",
			a.base.Scheme, a.base.Host, strings.Join(names, ", "))
	}
	only := *card
	only.SupportedInterfaces = here
	c, err := a2aclient.NewFromCard(ctx, &only, a2aclient.WithJSONRPCTransport(a.http), a2aclient.WithRESTTransport(a.http))
	if err != nil {
		return nil, false, fmt.Errorf("its agent card offers no transport agentrun speaks: %w", err)
	}
	a.client, a.streams = c, card.Capabilities.Streaming
	return c, a.streams, nil
}

// forget drops the client after a failure that may mean the card changed (the
// agent moved): the next call reads it again.
func (a *Agent) forget(c *a2aclient.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client == c {
		a.client = nil
	}
}

// stream sends the task with message/stream and follows its events until it
// settles; a stream that ends before is followed by polling.
func (a *Agent) stream(ctx context.Context, c *a2aclient.Client, req *a2a.SendMessageRequest, f *follow) error {
	for ev, err := range c.SendStreamingMessage(ctx, req) {
		if err != nil {
			return err
		}
		f.take(ev)
		if f.settled() {
			return nil
		}
	}
	if f.task == "" && f.reply == nil {
		return errors.New("its stream ended before it said anything")
	}
	return nil
}

// send sends the task with message/send, asking for the task at once so that a
// call that ends first can cancel it; poll follows it from there.
func (a *Agent) send(ctx context.Context, c *a2aclient.Client, req *a2a.SendMessageRequest, f *follow) error {
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		return err
	}
	f.take(res)
	return nil
}

// poll asks for the task until it settles, more slowly as it goes on.
func (a *Agent) poll(ctx context.Context, c *a2aclient.Client, f *follow) error {
	wait := 200 * time.Millisecond
	for !f.settled() {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		t, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(f.task)})
		if err != nil {
			return err
		}
		f.take(t)
		wait = min(2*wait, 2*time.Second)
	}
	return nil
}

// cancel cancels the call's task when the call ends before the task did: the
// remote agent must not go on working for a run that no longer waits.
func (a *Agent) cancel(ctx context.Context, c *a2aclient.Client, f *follow) {
	if f.task == "" || f.state.Terminal() {
		return
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer stop()
	if t, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(f.task)}); err == nil {
		f.take(t)
	} else {
		f.state = a2a.TaskStateCanceled // asked for, at least: the last state the run knows
	}
	f.report()
}

// outcome is the answer of a settled task, or the error the model reads.
func (a *Agent) outcome(ctx context.Context, c *a2aclient.Client, f *follow) (string, error) {
	f.report()
	if f.reply != nil || f.state == a2a.TaskStateCompleted {
		if text := f.answer(); text != "" {
			return text, nil
		}
		return "", fmt.Errorf("the remote agent %s answered without any text", a.name)
	}
	why := cmp.Or(f.status, "no reason given")
	switch f.state {
	case a2a.TaskStateFailed:
		return "", fmt.Errorf("the remote agent %s failed the task: %s", a.name, why)
	case a2a.TaskStateRejected:
		return "", fmt.Errorf("the remote agent %s rejected the task: %s", a.name, why)
	case a2a.TaskStateCanceled:
		return "", fmt.Errorf("the remote agent %s canceled the task: %s", a.name, why)
	case a2a.TaskStateAuthRequired:
		a.cancel(ctx, c, f)
		return "", fmt.Errorf("the remote agent %s asks for authorization that agentrun cannot give it (auth-required): %s", a.name, why)
	default: // input-required: nobody here can answer it, and asking again would loop
		a.cancel(ctx, c, f)
		return "", fmt.Errorf("the remote agent %s needs input it cannot get here (input-required): %s; send a new task that says everything it needs", a.name, why)
	}
}

// failure is the error of a call that did not settle: the call's end (its time
// is the engine's to tell), a response over the bound, or the agent not
// reached — never with more of its URL than the scheme and host.
func (a *Agent) failure(ctx context.Context, over *limitState, c *a2aclient.Client, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("the remote agent %s did not finish: %w", a.name, ctx.Err())
	case over.exceeded.Load():
		return fmt.Errorf("the remote agent %s answered with more than %d MiB", a.name, MaxResponse>>20)
	}
	if c != nil {
		a.forget(c)
	}
	msg := a.urls.ReplaceAllString(err.Error(), a.base.Scheme+"://"+a.base.Host)
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return fmt.Errorf("the remote agent %s (%s): %s", a.name, a.base.Host, msg)
}
