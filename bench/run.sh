#!/usr/bin/env bash
# Load benchmark of the release binary, side by side with the peer kit in ../shared/bench-peers
# (C: plain rmcp, D: bare axum ceiling; A and B with SERVERS='A B C D'), on both protocol
# revisions, in one run, so every figure is a ratio against peers measured minutes apart on the
# same machine. Also times start-up to ready, and complete research-study sessions.
#
#   bench/run.sh                       # C and D beside rimthan, C=16 and 64, 5,000 requests/cell
#   SERVERS='A B C D' REQUESTS=20000 bench/run.sh
#
# Writes bench/results/results.md (the kit's tables) and prints the ratios.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source_kit=${BENCH_PEERS:-$repo/../shared/bench-peers}
[[ -x "$source_kit/run.sh" ]] || { echo "bench-peers kit not found at $source_kit (set BENCH_PEERS)" >&2; exit 2; }
# The kit builds and installs into its own folder: run a copy (kept, so its builds are reused).
kit=${BENCH_WORK:-$HOME/.cache/rimthan-bench}/bench-peers
mkdir -p "$kit"
cp -r --no-preserve=mode "$source_kit/." "$kit/"
chmod +x "$kit/run.sh" "$kit/report.py"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
(cd "$repo" && cargo build --release -p rimthan-cli)
bin="$CARGO_TARGET_DIR/release/rimthan"
out="$repo/bench/results"
work=$(mktemp -d "${TMPDIR:-/tmp}/rimthan-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# One store for every cell: each cell starts a fresh server process on it, so a checkpoint
# issued before the run stays valid (the checkpoint secret lives in the store).
db="sqlite://$work/bench.sqlite"
# The default release offers more than one workflow: name the one the figures were taken with.
"$bin" stage --harness codex --workflow research-study --project "$work/project" --database-url "$db" >/dev/null
checkpoint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$work/project/.rimthan/workflow-session.json")
printf '{"name": "rimthan.get_active_step", "arguments": {"checkpoint": "%s"}}\n' "$checkpoint" > "$work/call.json"

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
TARGET_CMD="exec '$bin' serve --listen 127.0.0.1:\$PORT --database-url '$db'" \
TARGET_LABEL="rimthan $("$bin" --version | awk '{print $2}')" \
TARGET_DISCOVER=1 TARGET_CALL="$work/call.json" \
PROTOCOLS=${PROTOCOLS:-'legacy 2026-07-28'} SERVERS=${SERVERS:-'C D'} MODES=${MODES:-stateless-json} \
CONCURRENCY=${CONCURRENCY:-'16 64'} REQUESTS=${REQUESTS:-5000} WARMUP=${WARMUP:-500} NAGLE_CHECK=0 \
RESULTS_MD="$out/results.md" RESULTS_JSONL="$out/results.jsonl" CARGO_TARGET_DIR="$kit/target" ./run.sh

python3 - "$out/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def best(pred):
    xs = [r for r in rows if "rps" in r and not r.get("errors") and pred(r)]
    return max(xs, key=lambda r: r["rps"]) if xs else None
proto = lambda r: r.get("protocol", "legacy")
for p in sorted({proto(r) for r in rows}):
    for op in ("read", "call"):
        is_op = lambda r: op in r.get("op", "")
        ours = best(lambda r: r.get("server", "").startswith("rimthan") and is_op(r) and proto(r) == p)
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
# against a fresh server on a durable SQLite file. Not pinned: the workers share the machine.
(cd "$repo" && cargo build --release -p rimthan-stage --example load)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --database-url "sqlite://$work/sessions.sqlite" >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.05; done
for concurrency in ${SESSION_CONCURRENCY:-16 64}; do
  "$CARGO_TARGET_DIR/release/examples/load" "http://127.0.0.1:$port/mcp" codex research-study \
    "$concurrency" "${SESSIONS:-400}"
done
kill "$server"
