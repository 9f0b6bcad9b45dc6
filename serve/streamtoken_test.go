package serve_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A page opens a run's events with a stream token in the URL, as an EventSource
// must: the token of the run's user opens that run and no other; another user
// gets no token for it; a token that was tampered with opens nothing.
func TestStreamTokenOpensOneRunsEvents(t *testing.T) {
	e := newEnv(t, envOptions{})
	mine := e.run(aliceToken, "hello", "")
	other := e.run(aliceToken, "hello again", "")

	tok := e.doT(t, "POST", "/v1/runs/"+mine.ID+"/stream_token", aliceToken, nil)
	if tok.Status != http.StatusOK {
		t.Fatalf("stream token: %d %s", tok.Status, tok.Body)
	}
	v := tok.json(t)
	token, _ := v["token"].(string)
	eventsURL, _ := v["events_url"].(string)
	if token == "" || !strings.HasPrefix(eventsURL, "/v1/runs/"+mine.ID+"/events?stream_token=") {
		t.Fatalf("stream token answer %s", tok.Body)
	}
	resp, err := e.request(context.Background(), "GET", eventsURL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	events := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	if res := checkRunStream(t, events, 1); res.ID != mine.ID || res.Result.Answer != greeting {
		t.Errorf("the events of %s: %+v", mine.ID, res)
	}

	for name, path := range map[string]string{
		"another run":      "/v1/runs/" + other.ID + "/events?stream_token=" + url.QueryEscape(token),
		"a changed token":  "/v1/runs/" + mine.ID + "/events?stream_token=" + url.QueryEscape(strings.Replace(token, ".", ".x", 1)),
		"no token at all":  "/v1/runs/" + mine.ID + "/events",
		"an empty token":   "/v1/runs/" + mine.ID + "/events?stream_token=",
		"a token for none": "/v1/runs/" + mine.ID + "/events?stream_token=abc.def",
	} {
		if r := e.doT(t, "GET", path, "", nil); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.doT(t, "POST", "/v1/runs/"+mine.ID+"/stream_token", bobToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("bob asked for a token of alice's run: %d %s", r.Status, r.Body)
	}
}
