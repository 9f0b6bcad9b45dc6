#!/usr/bin/env bash
# Times `agentrun exec` of a one-turn spec against a local server that answers at
# once, so what is measured is agentrun's own start-up and one request: N runs
# (default 30) under /usr/bin/time, then the median and p90 wall time, CPU time
# (user+sys, steadier than wall time on a busy machine) and peak RSS.
#
#   bench/startup.sh [N]                    builds ./cmd/agentrun and measures it
#   AGENTRUN_BIN=path bench/startup.sh [N]  measures that binary instead
#
# The last line measures /usr/bin/time running `true`: what the harness itself adds.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-30}
dir=$(mktemp -d)
responder=
cleanup() {
  if [[ -n $responder ]]; then kill "$responder" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
if [[ -n ${AGENTRUN_BIN:-} ]]; then
  cp "$AGENTRUN_BIN" "$dir/agentrun"
else
  go build -o "$dir/agentrun" ./cmd/agentrun
fi
# Peak RSS counts the binary's pages mapped from the page cache, and how many get
# mapped depends on how the file got there: a freshly written file maps differently
# (by megabytes) from one read back from disk. Dropping this one file from the cache
# makes every measured binary arrive the same way, as an installed one does.
sync "$dir/agentrun"
dd if="$dir/agentrun" iflag=nocache count=0 status=none

# The model server: every POST gets the same non-streamed chat.completion. It binds
# port 0 and prints the port the kernel chose, so two runs never collide.
python3 -u - >"$dir/port" <<'EOF' &
import http.server, json
BODY = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello."}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1])
server.serve_forever()
EOF
responder=$!
for _ in $(seq 1 100); do
  [[ -s $dir/port ]] && break
  sleep 0.05
done
port=$(<"$dir/port")
[[ -n $port ]] || { echo "startup.sh: the responder did not start" >&2; exit 1; }

cat >"$dir/agent.yaml" <<EOF
version: 1
name: one-turn
model: {name: m, base_url: "http://127.0.0.1:$port/v1", api_key_env: K}
instructions: Answer briefly.
EOF
cd "$dir" # a run writes nothing, but if it did it would land here
export K=x

# One run that must answer; it also reads the binary back into the page cache.
answer=$(./agentrun exec -q agent.yaml hi)
[[ $answer == Hello. ]] || { echo "startup.sh: unexpected answer: $answer" >&2; exit 1; }

# cpu_ms FILE: the children's user+sys time in ms from the output of `times`.
cpu_ms() {
  awk 'function ms(t, m) { split(t, m, "m"); return (m[1] * 60 + m[2]) * 1000 }
    NR == 2 { printf "%.3f", ms($1) + ms($2) }' "$1"
}

# stat COLUMN-EXPRESSION: the median (mean of the two middle values for an even
# count) and the p90 (the value 90% of runs stay at or under) of one column of runs.
stat() {
  awk "{ print $1 }" "$dir/runs" | sort -n | awk '{ v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          p = v[int(NR * 0.9 + 0.999)]; printf "%.1f %.1f\n", m, p }'
}

# measure LABEL COMMAND...: N runs of COMMAND under /usr/bin/time, one line of
# figures. Bash's `times` gives the children's CPU time in milliseconds (GNU time's
# %U and %S only in hundredths); the wall clock is $EPOCHREALTIME around the run.
# Both are read in this shell itself: a subshell would have no children to report.
measure() {
  local label=$1 t0 t1
  shift
  : >"$dir/runs"
  for _ in $(seq 1 "$n"); do
    times >"$dir/cpu0"
    t0=$EPOCHREALTIME
    /usr/bin/time -f %M -o "$dir/rss" "$@" >/dev/null
    t1=$EPOCHREALTIME
    times >"$dir/cpu1"
    echo "$t0 $t1 $(cpu_ms "$dir/cpu0") $(cpu_ms "$dir/cpu1") $(<"$dir/rss")" >>"$dir/runs"
  done
  local wall_med wall_p90 cpu_med cpu_p90 rss_med rss_p90
  read -r wall_med wall_p90 < <(stat '($2 - $1) * 1000')
  read -r cpu_med cpu_p90 < <(stat '$4 - $3')
  read -r rss_med rss_p90 < <(stat '$5 / 1024')
  printf '%-22s wall median %5s ms  p90 %5s ms · cpu median %5s ms  p90 %5s ms · max RSS median %5s MiB  p90 %5s MiB\n' \
    "$label" "$wall_med" "$wall_p90" "$cpu_med" "$cpu_p90" "$rss_med" "$rss_p90"
}

echo "$n runs each"
measure "exec, one turn" ./agentrun exec -q agent.yaml hi
measure "harness (time true)" true
