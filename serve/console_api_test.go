package serve_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/serve"
)

// Under agentrun dev a request is the user its headers name, with their
// attributes and roles; a bad name, attributes or role is refused.
func TestDevRequestsChooseTheirUser(t *testing.T) {
	e := newEnv(t, envOptions{dev: true})
	as := func(headers ...string) response {
		return e.do("POST", "/v1/agents/support/runs", "", map[string]any{"input": "hello", "conversation": "c1"}, headers...)
	}
	if r := as(serve.DevUserHeader, "dana@example.com", serve.DevAttributesHeader, `{"tier":"gold"}`); r.Status != http.StatusOK {
		t.Fatalf("a dev run: status %d: %s", r.Status, r.Body)
	}
	if got := e.conversations(""); len(got) != 0 {
		t.Errorf("the default dev user sees dana's conversations: %v", got)
	}
	r := e.do("GET", "/v1/conversations", "", nil, serve.DevUserHeader, "dana@example.com")
	if !strings.Contains(string(r.Body), `"c1"`) {
		t.Errorf("dana's conversations: %d %s", r.Status, r.Body)
	}
	for _, bad := range [][]string{
		{serve.DevUserHeader, "bad/user"},
		{serve.DevUserHeader, strings.Repeat("u", 129)},
		{serve.DevAttributesHeader, `["not","an","object"]`},
		{serve.DevAttributesHeader, `{"n":1}`},
		{serve.DevRolesHeader, "root"},
	} {
		if r := as(bad...); r.Status != http.StatusUnauthorized {
			t.Errorf("%v: status %d, want 401: %s", bad, r.Status, r.Body)
		}
	}
	// A run's approver role comes from its header too.
	if r := e.do("GET", "/v1/approvals", "", nil, serve.DevRolesHeader, "approver"); r.Status != http.StatusOK {
		t.Errorf("an approver's list: status %d: %s", r.Status, r.Body)
	}
	// Tokens mean nothing to a dev server: the header's user runs.
	r = e.do("GET", "/v1/conversations", aliceToken, nil, serve.DevUserHeader, "dana@example.com")
	if !strings.Contains(string(r.Body), `"c1"`) {
		t.Errorf("with a token: %d %s", r.Status, r.Body)
	}
}

// A server without authentication (dev, --insecure-no-auth) answers no page of
// another site, and no host name but a loopback one (a DNS name rebound to
// 127.0.0.1); --insecure-no-auth also answers the origins its CORS allows.
func TestUnauthenticatedServersRefuseOtherSites(t *testing.T) {
	const allowed = "https://shop.example"
	for _, mode := range []string{"dev", "insecure"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, envOptions{dev: mode == "dev", insecure: mode == "insecure", ui: true,
				cors: serve.CORSConfig{AllowedOrigins: []string{allowed}}})
			for _, c := range []struct {
				name    string
				headers []string
				want    int
			}{
				{"no origin", nil, http.StatusOK},
				{"its own page", []string{"Origin", e.URL}, http.StatusOK},
				{"another site's page", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
				{"another port", []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden},
				{"a rebound name", []string{"Host", "evil.example:80"}, http.StatusForbidden},
				{"a rebound name, its own origin", []string{"Host", "evil.example", "Origin", "http://evil.example"}, http.StatusForbidden},
				{"localhost", []string{"Host", "localhost"}, http.StatusOK},
				{"an origin CORS allows", []string{"Origin", allowed}, map[string]int{"dev": http.StatusForbidden, "insecure": http.StatusOK}[mode]},
			} {
				t.Run(c.name, func(t *testing.T) {
					req, _ := http.NewRequest("GET", e.URL+"/v1/agents", nil)
					for i := 0; i+1 < len(c.headers); i += 2 {
						req.Header.Set(c.headers[i], c.headers[i+1])
						if c.headers[i] == "Host" {
							req.Host = c.headers[i+1]
						}
					}
					resp, err := e.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != c.want {
						t.Errorf("status %d, want %d", resp.StatusCode, c.want)
					}
					if mode == "dev" && resp.Header.Get("Access-Control-Allow-Origin") != "" {
						t.Errorf("a dev server allows CORS: %v", resp.Header)
					}
				})
			}
			// The console's pages are served, with a policy that keeps them to their origin.
			r := e.do("GET", "/ui/", "", nil)
			if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
				!strings.Contains(r.Header.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("GET /ui/: %d %v", r.Status, r.Header)
			}
		})
	}
}

func TestDevNeedsALoopbackAddress(t *testing.T) {
	_, err := serve.New(t.Context(), serve.Options{Config: serve.Config{Addr: "0.0.0.0:8080"}, Dev: true, Specs: []string{"testdata/support.yaml"}})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Dev on 0.0.0.0: %v", err)
	}
}

type statusBody struct {
	OK          bool      `json:"ok"`
	Mode        string    `json:"mode"`
	LoadedAt    time.Time `json:"loaded_at"`
	CheckedAt   time.Time `json:"checked_at"`
	Reloads     int       `json:"reloads"`
	Agents      []string  `json:"agents"`
	Error       string    `json:"error"`
	Diagnostics []struct {
		File, Severity, Message, Source string
		Line, Col                       int
	} `json:"diagnostics"`
}

func (e *env) status(token string) statusBody {
	e.t.Helper()
	r := e.do("GET", "/v1/status", token, nil)
	var st statusBody
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &st) != nil {
		e.t.Fatalf("GET /v1/status: %d %s", r.Status, r.Body)
	}
	return st
}

// The status tells what became of the last reload: under dev with the specs'
// diagnostics and their lines, under serve without them.
func TestStatusTellsOfAFailedReload(t *testing.T) {
	for _, dev := range []bool{true, false} {
		t.Run(map[bool]string{true: "dev", false: "serve"}[dev], func(t *testing.T) {
			e := newEnv(t, envOptions{dev: dev})
			token := aliceToken
			if dev {
				token = ""
			}
			st := e.status(token)
			if !st.OK || st.Reloads != 0 || len(st.Agents) != 1 || st.Agents[0] != "support" || st.LoadedAt.IsZero() ||
				st.Mode != map[bool]string{true: "dev", false: "serve"}[dev] {
				t.Fatalf("at start: %+v", st)
			}
			e.writeSpec(func(s string) string { return strings.Replace(s, "name: support", "name: support\nnot_a_key: 1", 1) })
			if err := e.srv.Reload(t.Context()); err == nil {
				t.Fatal("the reload of an invalid spec succeeded")
			}
			failed := e.status(token)
			if failed.OK || failed.Reloads != 1 || !failed.LoadedAt.Equal(st.LoadedAt) || !failed.CheckedAt.After(st.CheckedAt) ||
				len(failed.Agents) != 1 || failed.Error == "" {
				t.Errorf("after a failed reload: %+v", failed)
			}
			switch {
			case dev && (len(failed.Diagnostics) == 0 || failed.Diagnostics[0].File != e.spec ||
				!strings.Contains(failed.Diagnostics[0].Source, "not_a_key") || failed.Diagnostics[0].Line == 0):
				t.Errorf("dev diagnostics: %+v", failed.Diagnostics)
			case !dev && (len(failed.Diagnostics) != 0 || strings.Contains(failed.Error, e.spec)):
				t.Errorf("serve shows its users the specs' problems: %+v", failed)
			}
			e.writeSpec(func(s string) string { return s })
			if err := e.srv.Reload(t.Context()); err != nil {
				t.Fatal(err)
			}
			if again := e.status(token); !again.OK || again.Error != "" || !again.LoadedAt.After(st.LoadedAt) || again.Reloads != 2 {
				t.Errorf("after a good reload: %+v", again)
			}
		})
	}
}

// GET /v1/runs lists the caller's runs alone, newest first.
func TestListRunsIsPerUser(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.run(aliceToken, "hello", "a1")
	second := e.run(aliceToken, "你好，订单 1001 到哪了？", "a2")
	bobs := e.run(bobToken, "hello", "b1")
	list := func(token, query string) []map[string]any {
		r := e.do("GET", "/v1/runs"+query, token, nil)
		var body struct{ Runs []map[string]any }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
			t.Fatalf("GET /v1/runs%s: %d %s", query, r.Status, r.Body)
		}
		return body.Runs
	}
	runs := list(aliceToken, "")
	if len(runs) != 2 || runs[0]["id"] != second.ID || runs[1]["id"] != first.ID {
		t.Fatalf("alice's runs: %v", runs)
	}
	if runs[0]["input"] != "你好，订单 1001 到哪了？" || runs[0]["status"] != "finished" || runs[0]["stop"] != "completed" ||
		runs[0]["conversation"] != "a2" || runs[0]["agent"] != "support" {
		t.Errorf("a run's summary: %v", runs[0])
	}
	if got := list(aliceToken, "?conversation=a1"); len(got) != 1 || got[0]["id"] != first.ID {
		t.Errorf("?conversation=a1: %v", got)
	}
	if got := list(aliceToken, "?agent=other"); len(got) != 0 {
		t.Errorf("?agent=other: %v", got)
	}
	if got := list(bobToken, ""); len(got) != 1 || got[0]["id"] != bobs.ID {
		t.Errorf("bob's runs: %v", got)
	}
}

// A run whose input a filter blocked is listed without it.
func TestListRunsHidesABlockedInput(t *testing.T) {
	e := newEnv(t, envOptions{editSpec: func(s string) string {
		return s + "filters:\n  - name: no-card-numbers\n    on: input\n    when: input matches '\\\\b\\\\d{16}\\\\b'\n    action: block\n    message: No card numbers.\n"
	}})
	res := e.run(aliceToken, "my card is 4111111111111111", "c1")
	if res.Result.Stop != "blocked" {
		t.Fatalf("the run was not blocked: %+v", res)
	}
	r := e.do("GET", "/v1/runs", aliceToken, nil)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "4111111111111111") || !strings.Contains(string(r.Body), res.ID) {
		t.Errorf("GET /v1/runs: %d %s", r.Status, r.Body)
	}
}

// Under --ui a run keeps its model requests' messages for their owner; elsewhere
// it keeps none.
func TestModelRequestsKeptForTheConsole(t *testing.T) {
	e := newEnv(t, envOptions{ui: true})
	res := e.run(aliceToken, "帮我看看订单", "c1")
	stream := e.do("GET", "/v1/runs/"+res.ID+"/events", aliceToken, nil)
	var seq, other string // the first model request's event, and an event that is none
	for _, ev := range newSSEReader(strings.NewReader(string(stream.Body))).all(t) {
		switch {
		case ev.Event == "model_request" && seq == "":
			seq = ev.ID
		case ev.Event != "model_request" && other == "":
			other = ev.ID
		}
	}
	if seq == "" || other == "" {
		t.Fatalf("the run's events: %s", stream.Body)
	}
	r := e.do("GET", "/v1/runs/"+res.ID+"/requests/"+seq, aliceToken, nil)
	var kept struct {
		Seq      int
		Purpose  string
		Offered  []string
		Messages []struct{ Role, Content string }
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &kept) != nil {
		t.Fatalf("GET requests/1: %d %s", r.Status, r.Body)
	}
	last := kept.Messages[len(kept.Messages)-1]
	if strconv.Itoa(kept.Seq) != seq || kept.Purpose != "agent" || len(kept.Offered) == 0 || last.Role != "user" || last.Content != "帮我看看订单" {
		t.Errorf("the first request: %+v", kept)
	}
	if r := e.do("GET", "/v1/runs/"+res.ID+"/requests/"+seq, bobToken, nil); r.Status != http.StatusNotFound || r.errorCode(t) != "run_not_found" {
		t.Errorf("bob reads alice's request: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/v1/runs/"+res.ID+"/requests/"+other, aliceToken, nil); r.Status != http.StatusNotFound || r.errorCode(t) != "request_not_kept" {
		t.Errorf("an event that is no request: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/v1/runs/"+res.ID+"/requests/x", aliceToken, nil); r.Status != http.StatusBadRequest {
		t.Errorf("a bad seq: %d %s", r.Status, r.Body)
	}

	plain := newEnv(t, envOptions{})
	res = plain.run(aliceToken, "帮我看看订单", "c1")
	if r := plain.do("GET", "/v1/runs/"+res.ID+"/requests/"+seq, aliceToken, nil); r.Status != http.StatusNotFound || r.errorCode(t) != "request_not_kept" {
		t.Errorf("without --ui: %d %s", r.Status, r.Body)
	}
}
