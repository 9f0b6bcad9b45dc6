// Package serveload is the load benchmark of `agentrun serve` (issue 16): many
// sessions at once, each running two-round tool runs against a fake model that
// takes its time, measured for throughput against the ideal, the latency serve
// adds, memory per run in flight and goroutines left behind.
//
//	go test ./bench/serve -run '^$' -bench ServeLoad -benchtime 5000x
//	bench/serve.sh                      the same, with the figures explained
//
// One benchmark operation is one run. The sessions (SERVELOAD_SESSIONS, default
// 1000) share b.N runs, each doing its share one after another in its own
// conversation; a session is its own user with its own bearer token. A run is: POST
// /v1/agents/load/runs (not streamed) → model call 1 answers with a tool call → the
// http tool calls the backend, which answers at once → model call 2 answers with
// text. The model waits SERVELOAD_LATENCY (default 100ms) before each answer, so a
// run costs 2 × latency of waiting and the ideal throughput is sessions ÷ (2 ×
// latency): 5000 runs/s with the defaults.
//
// The fake model (internal/openaitest) and the backend run in a child process (this
// test binary, started again with SERVELOAD_CHILD set), so the heap, the goroutines
// and the garbage collector measured are serve's and the load client's, not the
// fake's (which keeps every request it receives). They still share the machine's
// CPUs with serve, as the load client does.
//
// Figures (b.ReportMetric):
//   - runs/s: runs finished per second of the timed phase; ideal-%: that against
//     sessions ÷ (2 × latency).
//   - added-p50-ms, added-p99-ms: each run's latency at the client minus the 2 ×
//     latency the model waits: what serve (and HTTP, the tool call, the client and
//     the fake's own handling) add.
//   - KB/run: in a separate, untimed phase every session starts one run; while they
//     are all in flight (serve's agentrun_runs_in_flight gauge), after a forced GC,
//     live heap + goroutine stacks minus the same just before the runs started,
//     divided by the runs in flight. The sessions' goroutines already exist at the
//     baseline; the client's in-flight requests (a few KB each) are counted in.
//   - goroutines-delta: goroutines after the benchmark (idle client connections
//     closed, given up to 3s to settle) minus those after a warm-up of one run per
//     session (idle client connections closed the same way). The warm-up fills
//     serve's pools of idle connections to the model and the backend, which outlive
//     runs by design.
package serveload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/serve"
)

const (
	childEnv   = "SERVELOAD_CHILD"   // set: this process is the fake model and backend
	backendEnv = "SERVELOAD_BACKEND" // the backend's URL, read by testdata/agent.yaml
	answer     = "Order A1 is on its way: about 12 minutes."
)

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		child(v)
		return
	}
	os.Exit(m.Run())
}

// cleanupOnly is the testing.TB openaitest.New needs in the child, where there is
// no test: New only registers a cleanup, and the child exits instead.
type cleanupOnly struct{ testing.TB }

func (cleanupOnly) Cleanup(func()) {}

// child serves the fake model and the backend, prints their URLs, and exits when
// its standard input closes (the parent finished or died).
func child(latency string) {
	d, err := time.ParseDuration(latency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveload child:", err)
		os.Exit(2)
	}
	model := openaitest.New(cleanupOnly{}, reply)
	model.Latency = d
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"order":"A1","status":"delivering","eta_minutes":12}`)
	}))
	fmt.Println(model.URL, backend.URL)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// reply is the model: a tool call for the user's message, then the answer.
func reply(r openaitest.Request) openaitest.Reply {
	if n := len(r.Messages); n > 0 && r.Messages[n-1]["role"] == "user" {
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "order_status", Arguments: `{"order":"A1"}`}}}
	}
	return openaitest.Reply{Content: answer}
}

// rig is serve with its fake model and backend, and a client for it.
type rig struct {
	srv     *serve.Server
	ts      *httptest.Server
	client  *http.Client
	tokens  []string // the session i's bearer token
	latency time.Duration
	child   int // the fake's process id
}

// start runs the child, then serve over httptest, with one user per session.
func start(tb testing.TB, sessions int, latency time.Duration) *rig {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+latency.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the fake model did not start: %v", err)
	}
	modelURL, backendURL, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		tb.Fatalf("the fake model said %q", line)
	}
	tb.Setenv(backendEnv, backendURL) // testdata/agent.yaml's ${SERVELOAD_BACKEND}

	r := &rig{latency: latency, child: cmd.Process.Pid}
	var cfg serve.Config
	cfg.Addr = "127.0.0.1:0"
	for i := range sessions {
		tok := fmt.Sprintf("load-token-%d", i)
		sum := sha256.Sum256([]byte(tok))
		r.tokens = append(r.tokens, tok)
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, serve.TokenConfig{SHA256: hex.EncodeToString(sum[:]), User: fmt.Sprintf("user-%d", i)})
	}
	// Each session is one user running one run at a time, about 1/(2 × latency)
	// a second: the per-user rate (default 5/s) must allow that, and the total cap
	// (default 256) every session at once.
	cfg.Limits = serve.Limits{RatePerSecond: 100, Burst: 100, MaxConcurrentPerUser: 4, MaxConcurrent: 2*sessions + 16}
	env := map[string]string{"LLM_BASE_URL": modelURL, "LLM_API_KEY": "fake-key"}
	r.srv, err = serve.New(context.Background(), serve.Options{
		Config: cfg,
		Specs:  []string{"testdata/agent.yaml"},
		Store:  "memory:",
		Model:  "openai:fake",
		// The access log and run log are formatted as in production, then dropped.
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		tb.Fatal(err)
	}
	r.ts = httptest.NewServer(r.srv.Handler())
	r.client = &http.Client{
		Transport: &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: sessions + 16, IdleConnTimeout: time.Minute},
		Timeout:   time.Minute,
	}
	tb.Cleanup(func() {
		r.client.CloseIdleConnections()
		r.ts.Close()
		r.srv.Close()
	})
	return r
}

// run is one run of session i in its own conversation; it returns its latency.
func (r *rig) run(i int) (time.Duration, error) {
	body := fmt.Sprintf(`{"input":"Where is my order A1?","conversation":"conv-%d"}`, i)
	req, err := http.NewRequest(http.MethodPost, r.ts.URL+"/v1/agents/load/runs", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.tokens[i])
	t0 := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("session %d: %s: %s", i, resp.Status, bytes.TrimSpace(data))
	}
	var out struct {
		Result struct {
			Answer     string `json:"answer"`
			ToolRounds int    `json:"tool_rounds"`
			Turns      int    `json:"turns"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("session %d: %v: %s", i, err, data)
	}
	if res := out.Result; res.Answer != answer || res.ToolRounds != 1 || res.Turns != 2 {
		return 0, fmt.Errorf("session %d: not a two-round tool run: %s", i, data)
	}
	return d, nil
}

// load has every session do runs[i] runs one after another, all sessions at once
// once ready is closed (nil: at once). It returns every run's latency.
func (r *rig) load(runs []int, ready <-chan struct{}) ([]time.Duration, error) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, len(runs))
	var firstErr atomic.Pointer[error]
	for i, n := range runs {
		wg.Go(func() {
			if ready != nil {
				<-ready
			}
			for range n {
				d, err := r.run(i)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = append(lat[i], d)
			}
		})
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return nil, *p
	}
	return slices.Concat(lat...), nil
}

// inFlight reads serve's agentrun_runs_in_flight gauge.
func (r *rig) inFlight() int {
	mfs, err := r.srv.Metrics().Registry().Gather()
	if err != nil {
		return -1
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "agentrun_runs_in_flight" {
			for _, m := range mf.GetMetric() {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return int(n)
}

// settle closes the client's idle connections and waits (up to 3s) for the
// goroutine count to stop falling; it returns the count.
func (r *rig) settle() int {
	r.client.CloseIdleConnections()
	n, still := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && still < 10; {
		time.Sleep(20 * time.Millisecond)
		if m := runtime.NumGoroutine(); m < n {
			n, still = m, 0
		} else {
			still++
		}
	}
	return n
}

// memory is live heap plus goroutine stacks after a forced collection.
func memory() (heap, stacks uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// inFlightMemory starts one run per session at once and measures, while they are
// in flight, the memory they hold: bytes per run of heap and of stacks, and how
// many runs were in flight.
func (r *rig) inFlightMemory(sessions int) (heapPerRun, stackPerRun float64, n int, err error) {
	ready := make(chan struct{})
	runs := make([]int, sessions)
	for i := range runs {
		runs[i] = 1
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.load(runs, ready)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the sessions' goroutines are parked on ready
	heap0, stack0 := memory()
	close(ready)
	// Wait for every run to be in flight or, if admission is slower than a run, for
	// the most there will be: the count stops rising.
	best, still := 0, 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && best < sessions && still < 20; {
		time.Sleep(2 * time.Millisecond)
		if c := r.inFlight(); c > best {
			best, still = c, 0
		} else if best > 0 {
			still++
		}
	}
	before := r.inFlight()
	heap1, stack1 := memory()
	n = min(before, r.inFlight())
	if err := <-done; err != nil {
		return 0, 0, 0, err
	}
	if n <= 0 {
		return 0, 0, 0, errors.New("no run was in flight when measured")
	}
	return (float64(heap1) - float64(heap0)) / float64(n), (float64(stack1) - float64(stack0)) / float64(n), n, nil
}

// cpuTime is the CPU time (user + system) process pid ("self" for this one) has
// used so far, from /proc; 0 where there is no /proc.
func cpuTime(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its ")".
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		tb.Fatalf("%s=%q: want a duration like 100ms", name, v)
	}
	return d
}

// percentile is the value p of the way up sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func BenchmarkServeLoad(b *testing.B) {
	sessions := min(envInt(b, "SERVELOAD_SESSIONS", 1000), b.N)
	latency := envDuration(b, "SERVELOAD_LATENCY", 100*time.Millisecond)
	r := start(b, sessions, latency)

	// Warm-up, untimed: one run per session opens its connection and
	// conversation and fills serve's idle pools.
	one := make([]int, sessions)
	for i := range one {
		one[i] = 1
	}
	if _, err := r.load(one, nil); err != nil {
		b.Fatal(err)
	}
	goroutines0 := r.settle()

	runs := make([]int, sessions)
	for i := range b.N {
		runs[i%sessions]++
	}
	b.ReportAllocs()
	b.ResetTimer()
	self0, child0 := cpuTime("self"), cpuTime(strconv.Itoa(r.child))
	t0 := time.Now()
	lat, err := r.load(runs, nil)
	elapsed := time.Since(t0)
	self1, child1 := cpuTime("self"), cpuTime(strconv.Itoa(r.child))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}

	heapPerRun, stackPerRun, n, err := r.inFlightMemory(sessions)
	if err != nil { // on a busy machine the runs may all end during the measuring GC
		b.Logf("memory per run in flight not measured: %v", err)
	}
	goroutines1 := r.settle()

	model := 2 * latency
	added := make([]time.Duration, len(lat))
	for i, d := range lat {
		added[i] = d - model
	}
	slices.Sort(added)
	throughput := float64(len(lat)) / elapsed.Seconds()
	ideal := float64(sessions) / model.Seconds()
	b.ReportMetric(throughput, "runs/s")
	b.ReportMetric(100*throughput/ideal, "ideal-%")
	b.ReportMetric(ms(percentile(added, 0.50)), "added-p50-ms")
	b.ReportMetric(ms(percentile(added, 0.99)), "added-p99-ms")
	if n > 0 {
		b.ReportMetric((heapPerRun+stackPerRun)/1024, "KB/run")
	}
	b.ReportMetric(float64(goroutines1-goroutines0), "goroutines-delta")
	selfPerRun, childPerRun := ms(self1-self0)/float64(len(lat)), ms(child1-child0)/float64(len(lat))
	if self1 > 0 {
		b.ReportMetric(selfPerRun, "cpu-ms/run")
	}
	b.Logf("%d sessions, %d runs in %s, model latency %s per call: %.0f runs/s of an ideal %.0f (%.1f%%); "+
		"added latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; "+
		"in flight: %d runs, %.1f KB heap + %.1f KB stacks each; goroutines %d after warm-up, %d after; "+
		"CPU per run: %.2f ms in this process (serve and the load client), %.2f ms in the fake's (%d CPUs, wall %.2f ms per run)",
		sessions, len(lat), elapsed.Round(time.Millisecond), latency, throughput, ideal, 100*throughput/ideal,
		ms(percentile(added, 0.50)), ms(percentile(added, 0.90)), ms(percentile(added, 0.99)), ms(added[len(added)-1]),
		n, heapPerRun/1024, stackPerRun/1024, goroutines0, goroutines1,
		selfPerRun, childPerRun, runtime.GOMAXPROCS(0), ms(elapsed)/float64(len(lat)))
}

// TestServeLoadSmoke runs the benchmark's machinery small, so CI compiles and
// exercises it: 10 sessions, one two-round tool run each, then the in-flight
// memory phase. It asserts what the runs returned, never how fast.
func TestServeLoadSmoke(t *testing.T) {
	const sessions = 10
	// Model calls slow enough that the runs are still in flight while the memory
	// phase collects garbage, however loaded the machine is (-race, CI).
	r := start(t, sessions, 250*time.Millisecond)
	one := make([]int, sessions)
	for i := range one {
		one[i] = 1
	}
	lat, err := r.load(one, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != sessions {
		t.Fatalf("%d runs finished, want %d", len(lat), sessions)
	}
	if _, _, n, err := r.inFlightMemory(sessions); err != nil {
		t.Fatal(err)
	} else if n <= 0 || n > sessions {
		t.Fatalf("%d runs in flight, want 1 to %d", n, sessions)
	}
	if got := r.inFlight(); got != 0 {
		t.Errorf("%d runs still in flight after every client had its answer", got)
	}
}
