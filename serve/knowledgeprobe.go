package serve

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

// Bounds of a knowledge probe: the question, each passage's text in the answer,
// and how long the cache and retrieval may take.
const (
	maxProbeQuestion    = 4 << 10
	maxProbePassageText = 4 << 10
	probeTimeout        = 10 * time.Second
)

// probeRequest is the body of POST /v1/agents/{name}/knowledge/probe.
type probeRequest struct {
	Question string `json:"question"`
	Intent   string `json:"intent"`
}

// probeAnswer is what a run's knowledge stages would do with the question.
type probeAnswer struct {
	Intent string `json:"intent"`
	// RoutedBy says how the intent was chosen: pre (the request named it), rules,
	// fallback, or knowledge (routing needs the classifier, a model call the
	// probe never makes: the one intent with a cache or retrieval was taken);
	// Routing says why.
	RoutedBy  string                  `json:"routed_by"`
	Routing   string                  `json:"routing,omitempty"`
	Cache     *runtime.CacheCheck     `json:"cache"`
	Retrieval *runtime.RetrievalCheck `json:"retrieval"`
}

// routedByKnowledge: the classifier would route, and the probe took the one
// intent that has knowledge.
const routedByKnowledge = "knowledge"

// probeKnowledge answers POST /v1/agents/{name}/knowledge/probe: the FAQ cache's
// decision on a question, as the principal (their own learned entries with the
// shared ones, nobody else's), and the passages retrieval would pick. Nothing
// else of a run happens: no model, no judge, no filters, no memory.
func (s *Server) probeKnowledge(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := func(status int, code, msg string) { writeError(w, status, code, msg) }
	a, done := s.servedAgent(w, r.PathValue("name"))
	if a == nil {
		refuseBody(w, r)
		return
	}
	defer done()
	release, ok := s.admit(w, r, p, fail) // an embedder may be an API that costs: the user's rate counts
	if !ok {
		return
	}
	defer release()
	var body probeRequest
	if !decodeJSON(w, r, &body, fail) {
		return
	}
	switch n := len(body.Question); {
	case strings.TrimSpace(body.Question) == "":
		fail(http.StatusBadRequest, "invalid_request", "question is empty")
		return
	case n > maxProbeQuestion:
		fail(http.StatusBadRequest, "invalid_request", fmt.Sprintf("question is %d bytes; at most %d", n, maxProbeQuestion))
		return
	}
	known := knowledgeIntents(a.Settings())
	if len(known) == 0 {
		fail(http.StatusConflict, "no_knowledge", fmt.Sprintf("agent %s has no intent with an FAQ cache or retrieval", a.Spec.Name))
		return
	}
	answer, ok := probeRoute(a.Agent.Agent, a.Spec.Name, body, known, fail)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
	defer cancel()
	if err := probe(ctx, a.Agent.Agent, p.User.ID, body.Question, answer); err != nil {
		s.log.Warn("knowledge probe failed", "agent", a.Spec.Name, "error", err.Error())
		fail(http.StatusServiceUnavailable, "knowledge_unavailable", "the knowledge index could not answer: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// knowledgeIntents are the intents with an FAQ cache or retrieval, in spec order.
func knowledgeIntents(st *spec.Settings) []string {
	var out []string
	for _, in := range st.Intents {
		if in.Cache != nil || in.RAG != nil {
			out = append(out, in.Name)
		}
	}
	return out
}

// probeRoute picks the probe's intent: the one named, else as a run's router
// would without a model call; it has written the error when it reports false.
func probeRoute(a *runtime.Agent, name string, body probeRequest, known []string, fail func(int, string, string)) (*probeAnswer, bool) {
	if body.Intent != "" {
		if !slices.ContainsFunc(a.Settings().Intents, func(in spec.IntentSettings) bool { return in.Name == body.Intent }) {
			fail(http.StatusBadRequest, "unknown_intent", fmt.Sprintf("agent %s has no intent %q", name, body.Intent))
			return nil, false
		}
		return &probeAnswer{Intent: body.Intent, RoutedBy: string(runtime.RoutedPre)}, true
	}
	intent, how, detail, ok := a.RouteWithoutModel(body.Question)
	if ok {
		return &probeAnswer{Intent: intent, RoutedBy: string(how), Routing: detail}, true
	}
	if len(known) > 1 {
		fail(http.StatusBadRequest, "invalid_request", fmt.Sprintf("no rule matches and only the classifier, a model call, could route the question: name the intent (%s)", strings.Join(known, ", ")))
		return nil, false
	}
	return &probeAnswer{Intent: known[0], RoutedBy: routedByKnowledge,
		Routing: "no rule matched and the classifier would choose (a model call the probe does not make): " + known[0] + " is the one intent with knowledge"}, true
}

// probe fills in what the cache and retrieval of the answer's intent would do.
func probe(ctx context.Context, a *runtime.Agent, user, question string, answer *probeAnswer) error {
	intents := a.Settings().Intents
	in := slices.IndexFunc(intents, func(in spec.IntentSettings) bool { return in.Name == answer.Intent })
	if in < 0 {
		return nil // routed to no intent: no knowledge stage runs
	}
	if intents[in].Cache != nil {
		check, err := a.CheckCache(ctx, answer.Intent, question, user)
		if err != nil {
			return err
		}
		answer.Cache = check
	}
	if intents[in].RAG != nil {
		check, err := a.CheckRetrieval(ctx, answer.Intent, question)
		if err != nil {
			return err
		}
		for i := range check.Passages {
			check.Passages[i].Text = clipUTF8(check.Passages[i].Text, maxProbePassageText)
		}
		answer.Retrieval = check
	}
	return nil
}

// clipUTF8 is s cut to at most n bytes on a rune boundary, marked when cut.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
