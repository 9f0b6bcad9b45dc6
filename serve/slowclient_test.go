package serve_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/serve"
)

// Slow clients, on a raw TCP connection to the server's own http.Server: no
// request holds the server longer than limits.read_timeout, a body the server
// will not read is never drained, and a body still arriving holds its run's slot.

// clientWait is how long the tests' client waits for an answer: generous, since
// only a server that never answers goes over it.
const clientWait = 20 * time.Second

// slowRequest is a connection that sent a request's headers and the start of its
// body: Content-Length announces the whole body, of which it sent part.
type slowRequest struct {
	t    *testing.T
	conn net.Conn
	rest string // the body still to send
	br   *bufio.Reader
}

// sendSlow opens a connection to e and sends a POST of body to path, as token
// ("" for none), all but the body's last rest bytes, in one write.
func sendSlow(t *testing.T, e *env, path, token, body string, rest int) *slowRequest {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(clientWait))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agentrun.test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"+body[:len(body)-rest]); err != nil {
		t.Fatal(err)
	}
	return &slowRequest{t: t, conn: conn, rest: body[len(body)-rest:], br: bufio.NewReader(conn)}
}

// finish sends the rest of the body.
func (s *slowRequest) finish() {
	s.t.Helper()
	if _, err := io.WriteString(s.conn, s.rest); err != nil {
		s.t.Fatal(err)
	}
}

// answer reads the server's answer: its status and error code.
func (s *slowRequest) answer() (status int, code string) {
	s.t.Helper()
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		s.t.Fatalf("no answer: %v", err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		s.t.Fatalf("reading the answer: %v", err)
	}
	var e struct{ Error struct{ Code string } }
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, &e); err != nil {
			s.t.Fatalf("status %d: %v: %s", resp.StatusCode, err, data)
		}
	}
	return resp.StatusCode, e.Error.Code
}

// refused reads an answer after which the server closed the connection.
func (s *slowRequest) refused() (status int, code string, closed bool) {
	s.t.Helper()
	status, code = s.answer()
	return status, code, s.closed()
}

// closed reports whether the server closed the connection (EOF) within clientWait.
func (s *slowRequest) closed() bool {
	s.t.Helper()
	_, err := s.br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if err == nil {
		s.t.Fatal("the server sent more after its answer")
	}
	return true
}

// padded is a run request for input, padded with spaces to n bytes.
func padded(input string, n int) string {
	b := fmt.Sprintf(`{"input":%q}`, input)
	return b + strings.Repeat(" ", n-len(b))
}

// With a read timeout of an hour, only not reading a body lets the server answer a
// request whose body is still arriving: unauthenticated, or over the user's
// concurrency cap — while the body of the user's run in flight is still arriving.
func TestSlowBodyNotDrained(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{ReadTimeout: time.Hour, RatePerSecond: 100, Burst: 100, MaxConcurrentPerUser: 1}})
	for _, path := range []string{"/v1/agents/support/runs", "/v1/chat/completions"} {
		status, code, closed := sendSlow(t, e, path, "", padded("hi", 1000), 990).refused()
		if status != http.StatusUnauthorized || !closed {
			t.Errorf("unauthenticated %s with a body still arriving: %d %s, closed %v; want 401 and the connection closed", path, status, code, closed)
		}
	}

	// Alice's run whose body is still arriving holds her one slot: a run of hers
	// is refused once the server took the first one's headers.
	first := sendSlow(t, e, "/v1/agents/support/runs", aliceToken, padded("hi", 1000), 990)
	eventually(t, "a run of alice's is refused while her first one's body arrives", func() bool {
		return e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi"}).Status == http.StatusTooManyRequests
	})
	for _, path := range []string{"/v1/agents/support/runs", "/v1/chat/completions"} {
		body := padded("hi", 1000)
		if strings.Contains(path, "chat") {
			body = `{"model":"support","messages":[{"role":"user","content":"hi"}]}` + strings.Repeat(" ", 900)
		}
		status, code, closed := sendSlow(t, e, path, aliceToken, body, 900).refused()
		if status != http.StatusTooManyRequests || code != "too_many_runs" || !closed {
			t.Errorf("a second slow run on %s: %d %s, closed %v; want 429 too_many_runs and the connection closed", path, status, code, closed)
		}
	}
	// Bob has his own slot, and the first run, once its body arrived, runs.
	e.run(bobToken, "hi", "")
	first.finish()
	if status, code := first.answer(); status != http.StatusOK {
		t.Errorf("the first run, its body sent: %d %s", status, code)
	}
}

// A body, or headers, slower than limits.read_timeout: the server answers 408 (or,
// for headers, closes the connection) and gives back the run's slot; a run that
// lasts longer than the read timeout, streamed or not, is not cut by it.
func TestSlowBodyTimesOut(t *testing.T) {
	e := newEnv(t, envOptions{latency: 300 * time.Millisecond,
		limits: serve.Limits{ReadTimeout: 100 * time.Millisecond, RatePerSecond: 100, Burst: 100, MaxConcurrentPerUser: 1}})
	for _, path := range []string{"/v1/agents/support/runs", "/v1/chat/completions", "/v1/runs/run_x/approvals/call_x"} {
		status, code, closed := sendSlow(t, e, path, aliceToken, padded("hi", 1000), 990).refused()
		if status != http.StatusRequestTimeout || code != "request_timeout" || !closed {
			t.Errorf("a slow body on %s: %d %s, closed %v; want 408 request_timeout and the connection closed", path, status, code, closed)
		}
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(clientWait))
	io.WriteString(conn, "POST /v1/agents/support/runs HTTP/1.1\r\nHost: agentrun.test\r\n")
	if data, err := io.ReadAll(conn); err != nil || strings.Contains(string(data), "200 OK") {
		t.Errorf("headers that never end: %q, %v; want the connection closed", data, err)
	}

	// The slot came back, and runs longer than the read timeout finish.
	if res := e.run(aliceToken, "hi", ""); res.Result.Answer != greeting {
		t.Errorf("a run after the slow ones: %+v", res.Result)
	}
	stream := e.startStream(t.Context(), bobToken, map[string]any{"input": "hi"})
	defer stream.Body.Close()
	if res := checkRunStream(t, newSSEReader(stream.Body).all(t), 1); res.Result.Answer != greeting {
		t.Errorf("a streamed run: %+v", res.Result)
	}
}
