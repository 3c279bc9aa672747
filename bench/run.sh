#!/usr/bin/env bash
# Load benchmark of the release binary, side by side with the peer kit in ../shared/bench-peers
# (C: plain rmcp, D: bare axum ceiling; A and B with SERVERS='A B C D'), on both protocol
# revisions, in one run, so every figure is a ratio against peers measured minutes apart on the
# same machine, with the server pinned to one core (the kit's taskset) and the load generator to
# the other. What it measures is what a fleet of participants sends:
#
# - `get_active_step` round-robin over LIVE_SESSIONS (default 1,500) live sessions, each a real
#   session past its setup step (`crates/stage/examples/live_sessions.rs`), against peer C's
#   `tools/call`;
# - `resources/read` of every listed resource, against peer C's reads;
# - with VARY_META=1 (the default) every request of every server carrying its own W3C
#   `traceparent`, as a header and in `params._meta`, as tracing clients send it: the load
#   generator learns this from `bench/loadgen-vary-meta.patch`, applied to the kit's copy;
#   every cell warms up with one pass over the sessions (WARMUP, default LIVE_SESSIONS), so the
#   timed phase is a long-running server's steady state;
# - the miss path: one pass of `get_active_step` over every session on a fresh server, where
#   nothing is cached yet (each call reads its session from SQLite and builds its payload);
# - as a note only, `get_active_step` on one session repeated (ONE_SESSION=0 skips it);
# - start-up to ready, and complete sessions over HTTP on SQLite and PostgreSQL (not pinned).
#
#   bench/run.sh                       # C and D beside rimthan, C=16 and 64, 5,000 requests/cell
#   SERVERS='A B C D' REQUESTS=20000 bench/run.sh
#
# Writes bench/results/results.md (the kit's tables) and prints the ratios.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source_kit=${BENCH_PEERS:-$repo/../shared/bench-peers}
[[ -x "$source_kit/run.sh" ]] || { echo "bench-peers kit not found at $source_kit (set BENCH_PEERS)" >&2; exit 2; }
# The kit builds and installs into its own folder: run a copy (kept, so its builds are reused),
# with the load generator taught to vary per-request metadata.
kit=${BENCH_WORK:-$HOME/.cache/rimthan-bench}/bench-peers
mkdir -p "$kit"
cp -r --no-preserve=mode "$source_kit/." "$kit/"
chmod +x "$kit/run.sh" "$kit/report.py"
patch -s -p1 -d "$kit" <"$repo/bench/loadgen-vary-meta.patch"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
(cd "$repo" && cargo build --release -p rimthan-cli && cargo build --release -p rimthan-stage --example live_sessions --example load)
bin="$CARGO_TARGET_DIR/release/rimthan"
out="$repo/bench/results"
work=$(mktemp -d "${TMPDIR:-/tmp}/rimthan-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One store for every cell: each cell starts a fresh server process on it, so the checkpoints
# issued before the run stay valid (the checkpoint secret lives in the store).
db="sqlite://$work/bench.sqlite"
live=${LIVE_SESSIONS:-1500}
port=$(free_port)
"$bin" serve --listen "127.0.0.1:$port" --database-url "$db" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
# The default release offers more than one workflow: name the one the figures were taken with.
"$CARGO_TARGET_DIR/release/examples/live_sessions" "http://127.0.0.1:$port/mcp" codex research-study \
  8 "$live" "$work/calls.json"
kill "$server"; wait "$server" 2>/dev/null || true
python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))[0], open(sys.argv[2], "w"))' \
  "$work/calls.json" "$work/call.json"

# Start-up to ready on the embedded registry (median of 20 starts).
python3 - "$bin" "$work" <<'PY'
import socket, subprocess, sys, time, urllib.request, statistics
bin, work = sys.argv[1], sys.argv[2]
times = []
for i in range(20):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    t0 = time.perf_counter()
    p = subprocess.Popen([bin, "serve", "--listen", f"127.0.0.1:{port}", "--database-url", f"sqlite://{work}/startup-{i}.sqlite"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status == 200: break
        except Exception: time.sleep(0.001)
    times.append((time.perf_counter() - t0) * 1000)
    p.terminate(); p.wait()
print(f"start-up to ready: median {statistics.median(times):.1f} ms, max {max(times):.1f} ms (20 starts, fresh SQLite file each)")
PY

cd "$kit"
export LOADGEN_VARY_META=${VARY_META:-1}
version=$("$bin" --version | awk '{print $2}')
TARGET_CMD="exec '$bin' serve --listen 127.0.0.1:\$PORT --database-url '$db'" \
TARGET_LABEL="rimthan $version" \
TARGET_DISCOVER=1 TARGET_CALL="$work/calls.json" \
PROTOCOLS=${PROTOCOLS:-'legacy 2026-07-28'} SERVERS=${SERVERS:-'C D'} MODES=${MODES:-stateless-json} \
CONCURRENCY=${CONCURRENCY:-'16 64'} REQUESTS=${REQUESTS:-5000} WARMUP=${WARMUP:-$live} NAGLE_CHECK=0 \
RESULTS_MD="$out/results.md" RESULTS_JSONL="$out/results.jsonl" CARGO_TARGET_DIR="$kit/target" ./run.sh
# The miss path, pinned like the cells: a fresh server, one pass over every live session.
for protocol in ${PROTOCOLS:-legacy 2026-07-28}; do
  port=$(free_port)
  taskset -c 1 "$bin" serve --listen "127.0.0.1:$port" --database-url "$db" >/dev/null 2>&1 &
  server=$!
  until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
  echo "miss path, $protocol, $live sessions each read once, C=16:"
  taskset -c 0 "$kit/target/release/loadgen" --url "http://127.0.0.1:$port/mcp" --op call \
    --call-file "$work/calls.json" -c 16 -n "$live" --warmup 0 --protocol "$protocol" \
    --server-pid "$server" | grep 'req/s'
  kill "$server"; wait "$server" 2>/dev/null || true
done
if [[ ${ONE_SESSION:-1} == 1 ]]; then
  # The note: one session's checkpoint, sent over and over (its payload kept from the first call).
  TARGET_CMD="exec '$bin' serve --listen 127.0.0.1:\$PORT --database-url '$db'" \
  TARGET_LABEL="rimthan $version, one session repeated" TARGET_CALL="$work/call.json" OPS=call \
  PROTOCOLS=${PROTOCOLS:-'legacy 2026-07-28'} SERVERS=none MODES=${MODES:-stateless-json} \
  CONCURRENCY=${CONCURRENCY:-'16 64'} REQUESTS=${REQUESTS:-5000} WARMUP=${WARMUP:-$live} NAGLE_CHECK=0 APPEND=1 \
  RESULTS_MD="$out/results.md" RESULTS_JSONL="$out/results.jsonl" CARGO_TARGET_DIR="$kit/target" ./run.sh
fi
unset LOADGEN_VARY_META

python3 - "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def best(pred):
    xs = [r for r in rows if "rps" in r and not r.get("errors") and pred(r)]
    return max(xs, key=lambda r: r["rps"]) if xs else None
proto = lambda r: r.get("protocol", "legacy")
for p in sorted({proto(r) for r in rows}):
    for op, note in (("read", False), ("call", False), ("call", True)):
        is_op = lambda r: op in r.get("op", "")
        ours = best(lambda r: r.get("server", "").startswith("rimthan") and is_op(r) and proto(r) == p
                    and ("one session" in r.get("server", "")) == note)
        if note and ours:
            print(f"{p:>10} call, one session repeated (a note, not a fleet): {ours['rps']:,.0f} req/s at C={ours['concurrency']}")
            continue
        c = best(lambda r: r.get("server", "").startswith("C") and is_op(r) and proto(r) == p)
        d = best(lambda r: r.get("server", "").startswith("D") and is_op(r))
        if not ours:
            continue
        line = (f"{p:>10} {op:>4}: rimthan {ours['rps']:,.0f} req/s at C={ours['concurrency']} "
                f"(p50 {ours['p50_ms']:.2f} ms, p99 {ours['p99_ms']:.2f} ms, "
                f"{ours.get('server_cpu_us_per_req', 0):.0f} us CPU/req, peak RSS {ours.get('server_vmhwm_kb', 0) / 1024:.1f} MiB)")
        if c:
            line += f"; {ours['rps'] / c['rps']:.2f}x peer C ({c['rps']:,.0f})"
        if d:
            line += f"; {ours['rps'] / d['rps']:.2f}x ceiling D ({d['rps']:,.0f})"
        print(line)
PY

# Whole sessions over HTTP (2026-07-28): each worker a faithful harness (`rimthan stage` as a
# library: connect, list, read the assets, every prepare and submit with real files read back),
# each session's outputs its own bytes (`StageConfig::vary`), so no check verdict is reused,
# against a fresh server and store per cell: a durable SQLite file, and PostgreSQL when psql
# reaches one (BENCH_PG, default postgres://postgres@127.0.0.1:5432, a database created and
# dropped per cell). Not pinned: the workers share the machine. After each cell: the server's
# per-tool latency (p50/p99 from its histogram), its CPU time per complete session (so its own
# ceiling on one core), and for SQLite the largest the WAL file grew while the cell ran.
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
stores=sqlite
if command -v psql >/dev/null && psql "$pg/postgres" -Atc 'SELECT 1' >/dev/null 2>&1; then
  stores="sqlite postgres"
fi
ticks=$(getconf CLK_TCK)
for kind in $stores; do
for concurrency in ${SESSION_CONCURRENCY:-16 64}; do
  port=$(free_port)
  store="$work/sessions-$concurrency.sqlite"
  database="sqlite://$store"
  if [[ $kind == postgres ]]; then
    name="rimthan_bench_$$_$concurrency"
    psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name"
    database="$pg/$name"
  fi
  "$bin" serve --listen "127.0.0.1:$port" --database-url "$database" >/dev/null 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
  until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
  rm -f "$work/wal-peak"
  (peak=0; while kill -0 "$server" 2>/dev/null; do
     size=$(stat -c %s "$store-wal" 2>/dev/null || echo 0)
     (( size > peak )) && peak=$size && echo "$peak" > "$work/wal-peak"
     sleep 0.05
   done) &
  sampler=$!
  cpu_before=$(awk '{print $14 + $15}' "/proc/$server/stat")
  echo "$kind:"
  "$CARGO_TARGET_DIR/release/examples/load" "http://127.0.0.1:$port/mcp" codex research-study \
    "$concurrency" "${SESSIONS:-400}"
  cpu_after=$(awk '{print $14 + $15}' "/proc/$server/stat")
  python3 -c "import sys; cpu = ($cpu_after - $cpu_before) / $ticks; n = ${SESSIONS:-400}; print(f'  server CPU: {cpu * 1000 / n:.2f} ms per session, so at most {n / cpu:,.0f} sessions/s on one core')"
  curl -fs "http://127.0.0.1:$port/metrics" | python3 -c '
import re, sys
buckets = {}
for line in sys.stdin:
    m = re.match(r"rimthan_tool_call_duration_seconds_bucket\{(.*)\} (\d+)", line)
    if m:
        labels = dict(re.findall(r"(\w+)=\"([^\"]*)\"", m[1]))
        buckets.setdefault(labels["tool"], []).append((float(labels["le"]), int(m[2])))
def quantile(rows, q):
    total = rows[-1][1]
    lower, below = 0.0, 0
    for bound, count in rows:
        if count >= q * total:
            if bound == float("inf"):
                return lower
            share = (q * total - below) / max(count - below, 1)
            return lower + (bound - lower) * share
        lower, below = bound, count
for tool, rows in sorted(buckets.items()):
    print(f"  {tool}: p50 {quantile(rows, 0.5) * 1000:.1f} ms, p99 {quantile(rows, 0.99) * 1000:.1f} ms (server, {rows[-1][1]} calls)")
'
  kill "$server"; wait "$server" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
  if [[ $kind == sqlite ]]; then
    echo "  WAL peak: $(( $(cat "$work/wal-peak" 2>/dev/null || echo 0) / 1024 )) KiB"
  else
    psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name"
  fi
done
done
