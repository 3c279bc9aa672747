#!/usr/bin/env bash
# What tracing costs (docs/operations/tracing.md, docs/performance.md "Tracing"): whole
# research-study sessions over HTTP (2026-07-28, every session its own bytes and its own
# `traceparent`, as `rimthan stage` sends them), against three servers in turn, ROUNDS times
# alternating so the machine's drift falls on all three alike:
#
# - base: the release binary of BASE (default: the commit before tracing), export off by nature;
# - off: this commit, no endpoint (what every server without a collector runs);
# - on: this commit, exporting every span and the metrics to a collector on loopback that reads
#   and accepts each export (a Python OTLP/HTTP sink; it decodes nothing, so it costs the server
#   nothing a real collector would not).
#
# The server is pinned to core 0 and the harness workers to core 1. Reported per cell: sessions/s
# and the server's CPU per session (utime + stime from /proc before and after).
#
#   bench/tracing.sh                   # 200 sessions at C=16, 2 rounds
#   SESSIONS=400 ROUNDS=3 bench/tracing.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${BASE:-b7e328a}
sessions=${SESSIONS:-200}
concurrency=${CONCURRENCY:-16}
rounds=${ROUNDS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
work=$(mktemp -d "${TMPDIR:-/tmp}/rimthan-tracing.XXXXXX")
trap 'rm -rf "$work"; git -C "$repo" worktree remove --force "$work/base" 2>/dev/null || true' EXIT

# The base binary first: it shares the target folder's dependencies, and this commit's build
# after it overwrites the workspace's own crates.
git -C "$repo" worktree add -q --detach "$work/base" "$base"
(cd "$work/base" && cargo build -q --release -p rimthan-cli --bin rimthan)
cp "$CARGO_TARGET_DIR/release/rimthan" "$work/rimthan-base"
# The registry crate embeds registry/default by absolute path, and cargo hashes workspace crates
# by their path within the workspace: the base build's embedding must not stand for this one's.
cargo clean -q --release -p rimthan-registry
(cd "$repo" && cargo build -q --release -p rimthan-cli -p rimthan-stage --bin rimthan --example load)
cp "$CARGO_TARGET_DIR/release/rimthan" "$work/rimthan"
load="$CARGO_TARGET_DIR/release/examples/load"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The sink: reads each export whole and answers 200 with an empty body (an empty OTLP response).
sink_port=$(free_port)
python3 - "$sink_port" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
PY
sink=$!
trap 'kill "$sink" 2>/dev/null || true; rm -rf "$work"; git -C "$repo" worktree remove --force "$work/base" 2>/dev/null || true' EXIT

ticks=$(getconf CLK_TCK)
cell() {
  local label=$1 bin=$2; shift 2
  local port database server cpu_before cpu_after out
  port=$(free_port)
  database="sqlite://$work/$label-$RANDOM.sqlite"
  taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --database-url "$database" "$@" >/dev/null 2>&1 &
  server=$!
  until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
  # A warm-up that the figure leaves out: the first sessions pay for cold caches.
  taskset -c 1 "$load" "http://127.0.0.1:$port/mcp" codex research-study "$concurrency" 32 >/dev/null
  cpu_before=$(awk '{print $14 + $15}' "/proc/$server/stat")
  out=$(taskset -c 1 "$load" "http://127.0.0.1:$port/mcp" codex research-study "$concurrency" "$sessions")
  cpu_after=$(awk '{print $14 + $15}' "/proc/$server/stat")
  kill "$server"; wait "$server" 2>/dev/null || true
  python3 - "$label" "$cpu_before" "$cpu_after" "$ticks" "$sessions" "$out" <<'PY'
import re, sys
label, before, after, ticks, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rate = re.search(r"([\d.,]+) sessions/s", out)
print(f"{label:>4}: {rate[1] if rate else '?':>7} sessions/s, server CPU {(after - before) / ticks * 1000 / n:.2f} ms per session")
PY
}

echo "whole sessions, $sessions at C=$concurrency, server on core 0; base = $base"
for round in $(seq 1 "$rounds"); do
  echo "round $round:"
  cell base "$work/rimthan-base"
  cell off "$work/rimthan"
  cell on "$work/rimthan" --otlp-endpoint "http://127.0.0.1:$sink_port"
done
