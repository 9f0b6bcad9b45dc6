package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/openaitest"
)

// retryOutcome is what tools/node/openai-retry.mjs prints.
type retryOutcome struct {
	Answer      string
	ID          string
	Run         string
	Status      int
	Code        string
	Type        string
	ShouldRetry string
	Error       string
}

// askWithRetries asks serve's shop agent one question with the official openai
// client and its retries, against a shop API whose order lookups the handler
// answers, counting them.
func askWithRetries(t *testing.T, model *openaitest.Server, shop http.HandlerFunc, timeout, key string) (retryOutcome, *serveProc) {
	t.Helper()
	tools := nodetools.Dir(t)
	api := httptest.NewServer(shop)
	t.Cleanup(api.Close)
	p := startServe(t, serveOptions{store: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), model: model,
		tokens: map[string]string{"tok-node": "u-node"}, env: []string{"SHOP_API=" + api.URL}, specs: []string{shopSupport}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{filepath.Join(tools, "openai-retry.mjs"), p.url + "/v1", "tok-node", "shop-support", "Where is my order?", timeout}
	if key != "" {
		args = append(args, key)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai-retry: %v\n%s\n%s", err, out, stderr.String())
	}
	var got retryOutcome
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got, p
}

// shopModel looks the user's orders up, then answers, or fails once the
// lookup is done when fail is set.
func shopModel(t *testing.T, answer string, fail bool) *openaitest.Server {
	return openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		switch {
		case req.Judge:
			return openaitest.Reply{Content: `{"passed":true,"missing":""}`}
		case req.Messages[len(req.Messages)-1]["role"] == "tool" && fail:
			return openaitest.Reply{Status: http.StatusInternalServerError}
		case req.Messages[len(req.Messages)-1]["role"] == "tool":
			return openaitest.Reply{Content: answer}
		default:
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "list_recent_orders", Arguments: `{"status":"any"}`}}}
		}
	})
}

// The official client gives up on a slow answer and asks again with the same
// Idempotency-Key: the retry follows the first run, whose order lookup ran
// once, and gets its answer.
func TestServeRetryWithIdempotencyKeyRunsToolsOnce(t *testing.T) {
	const answer = "Your order A1001 is on its way."
	var lookups atomic.Int64
	got, _ := askWithRetries(t, shopModel(t, answer, false), func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		time.Sleep(1500 * time.Millisecond) // longer than the client waits
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"orders":[{"number":"A1001","status":"delivering"}]}`))
	}, "800", "order-question-1")
	if got.Answer != answer || got.Run == "" {
		t.Fatalf("the client ended with %+v", got)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("the order lookup ran %d times; want once", n)
	}
}

// A run whose model fails after a tool ran is a 424 with x-should-retry: false,
// which the official client does not retry: the tool runs once.
func TestServeFaultAfterToolsIsNotRetried(t *testing.T) {
	var lookups atomic.Int64
	got, _ := askWithRetries(t, shopModel(t, "", true), func(w http.ResponseWriter, r *http.Request) {
		lookups.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"orders":[{"number":"A1001","status":"delivering"}]}`))
	}, "20000", "")
	if got.Status != http.StatusFailedDependency || got.Code != "model_error" || got.Type != "server_error" || got.ShouldRetry != "false" {
		t.Fatalf("the client ended with %+v", got)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("the order lookup ran %d times; want once", n)
	}
}
