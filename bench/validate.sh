#!/usr/bin/env bash
# Times `agentrun validate` on 1000 spec files (copies of the examples), end to end:
# process start, schema compile, parsing and checks.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/agentrun" ./cmd/agentrun
examples=()
for f in examples/agents/*.yaml; do
  case $f in *.test.yaml) ;; *) examples+=("$f") ;; esac # the agents, not their tests
done
for i in $(seq 1 "$n"); do
  src=${examples[$((i % ${#examples[@]}))]}
  sed "s/^name: /name: a$i-/" "$src" >"$dir/agent-$i.yaml"
done
mkdir "$dir/specs" && mv "$dir"/agent-*.yaml "$dir/specs/"
cp -r examples/agents/skills "$dir/specs/" # the local skill packs the examples use
start=$(date +%s.%N)
"$dir/agentrun" validate "$dir/specs" | tail -n 1
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="$n" 'BEGIN { printf "validated %d files in %.3f s\n", n, e - s }'
