#!/usr/bin/env bash
# The load benchmark of `agentrun serve` (issue 16): SESSIONS sessions (default 1000)
# at once, each doing RUNS (default 5) two-round tool runs one after another against a
# fake model that waits LATENCY (default 100ms) before each answer. See the comment
# at the top of bench/serve/load_test.go for what each figure means.
#
#   bench/serve.sh                          1000 sessions × 5 runs, 100ms
#   SESSIONS=100 RUNS=20 bench/serve.sh     a smaller load
#   bench/serve.sh -cpuprofile cpu.out      extra flags go to `go test`
#
# The ideal throughput is SESSIONS ÷ (2 × LATENCY); the goals are ≥ 90 % of it, an
# added p99 ≤ 20 ms, ≤ 100 KB per run in flight and no goroutine left behind. The
# fake model runs on the same machine and its CPU time is reported too: on a small
# machine the CPUs, not serve's waiting, may be what limits the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${SESSIONS:-1000}
runs=${RUNS:-5}
export SERVELOAD_SESSIONS=$sessions
export SERVELOAD_LATENCY=${LATENCY:-100ms}
echo "$(nproc 2>/dev/null || echo ?) CPUs; $sessions sessions × $runs runs, model latency $SERVELOAD_LATENCY"
go test ./bench/serve -run '^$' -bench '^BenchmarkServeLoad$' -benchtime "$((sessions * runs))x" -count 1 "$@" |
  awk '/^Benchmark/ {
         for (i = 3; i < NF; i += 2) printf "  %-18s %s\n", $(i + 1), $i
         next
       }
       /load_test.go/ { sub(/^ *load_test.go:[0-9]+: /, ""); last = $0; next }
       /^(ok|FAIL|PASS|goos|goarch|pkg|cpu|---)/ { next }
       { print }
       END { if (last != "") { gsub(/; /, "\n  "); print "  " last } }' 
