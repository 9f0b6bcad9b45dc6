package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/serve"
)

// ServeMCP (agentrun mcp, over stdio) holds a call's result until the client
// has answered a ping sent after the call's last progress notification: on a
// byte stream the client may read the last notifications and the result
// together, and the TypeScript SDK's client then drops those notifications (it
// takes the response first). Driven here by a client that speaks JSON-RPC lines
// itself, so it sees the order of the server's messages exactly.
func TestMCPStdioSettlesProgressBeforeTheResult(t *testing.T) {
	e := newEnv(t, envOptions{})
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		p := serve.Principal{User: tool.User{ID: "alice", Attributes: map[string]string{"tier": "gold"}}, Via: "stdio"}
		served <- e.srv.ServeMCP(ctx, &mcp.IOTransport{Reader: toServer, Writer: fromServer}, p)
	}()

	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	messages := make(chan message, 64)
	t.Cleanup(func() {
		cancel()
		fromClient.Close()
		toClient.Close()
		<-served
		for range messages { // the reader is done
		}
	})
	go func() {
		defer close(messages)
		sc := bufio.NewScanner(toClient)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("%v: %s", err, sc.Bytes())
				return
			}
			messages <- m
		}
	}()
	send := func(format string, args ...any) {
		t.Helper()
		if _, err := fmt.Fprintf(fromClient, format+"\n", args...); err != nil {
			t.Fatal(err)
		}
	}
	next := func(within time.Duration) (message, bool) {
		t.Helper()
		select {
		case m, ok := <-messages:
			if !ok {
				t.Fatal("the server closed its output")
			}
			return m, true
		case <-time.After(within):
			return message{}, false
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"lines","version":"1"}}}`)
	if m, ok := next(30 * time.Second); !ok || string(m.ID) != "1" || m.Result == nil {
		t.Fatalf("initialize: %+v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"support","arguments":{"question":%q},"_meta":{"progressToken":"p"}}}`, ordersInput)

	var progress []string
	for {
		m, ok := next(30 * time.Second)
		if !ok {
			t.Fatalf("no answer to the call; progress %q", progress)
		}
		if m.Method == "notifications/progress" {
			progress = append(progress, m.Params.Message)
			continue
		}
		if string(m.ID) == "2" {
			t.Fatalf("the result came after progress %q with no ping before it: a client that reads them together may drop the progress", progress)
		}
		if m.Method != "ping" {
			t.Fatalf("unexpected %+v", m)
		}
		// The result waits for the ping's answer.
		if m2, ok := next(300 * time.Millisecond); ok {
			t.Fatalf("%+v came before the ping was answered", m2)
		}
		send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		break
	}
	if len(progress) == 0 || progress[len(progress)-1] != "the model answered" {
		t.Errorf("progress before the ping %q, want the last one to be the model's answer", progress)
	}
	m, ok := next(30 * time.Second)
	if !ok || string(m.ID) != "2" || m.Result == nil {
		t.Fatalf("after the ping: %+v", m)
	}
	var res struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != finalAnswer {
		t.Errorf("result %s (%v)", m.Result, err)
	}
}
