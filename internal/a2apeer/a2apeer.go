// Package a2apeer starts tools/node/a2a-peer.mjs, a remote agent served by the
// official A2A JS SDK's server, for the tests of agentrun's A2A client. Like
// nodetools, it skips a test when Node or tools/node's packages are missing,
// except in CI.
package a2apeer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
)

// Peer is a running a2a-peer.mjs. Its agents are at URL + "/stream" (streams),
// "/plain" (answers message/send, polled) and "/elsewhere" (its card names an
// endpoint on another host).
type Peer struct {
	URL   string
	Token string // what every JSON-RPC request must carry as its bearer token
}

// Log is what the peer saw (GET /peer/log).
type Log struct {
	Canceled []string          `json:"canceled"` // the tasks canceled, in order
	Contexts map[string]string `json:"contexts"` // each task's context
	Refused  int               `json:"refused"`  // requests refused for their token
}

// Start starts a peer that takes token; it stops when the test ends.
func Start(t testing.TB, token string) *Peer {
	t.Helper()
	dir := nodetools.Dir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "a2a-peer.mjs"), token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "http://") {
			t.Fatalf("a2a-peer.mjs did not print its URL (%q): %s", line, stderr.String())
		}
		return &Peer{URL: line, Token: token}
	case <-time.After(30 * time.Second):
		t.Fatalf("a2a-peer.mjs did not start: %s", stderr.String())
	}
	return nil
}

// Log reads what the peer saw so far.
func (p *Peer) Log(t testing.TB) Log {
	t.Helper()
	resp, err := http.Get(p.URL + "/peer/log")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l Log
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(fmt.Errorf("peer log: %w", err))
	}
	return l
}
