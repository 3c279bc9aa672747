#!/usr/bin/env bash
# Server CPU per whole research-study session, two builds side by side (issue 46,
# docs/performance.md "The price of proof: hand-offs"). Both servers run at once on core 0,
# each driven by its own `load` (2026-07-28, every session its own bytes, C = CONCURRENCY) on
# core 1, so whatever this shared machine does to one it does to the other; the roles swap every
# round. Reported per server and round: CPU per session (utime + stime of the process from /proc
# before and after, warm-up excluded) and context switches per session (every thread's), then
# where one server's CPU and switches went, by thread name.
#
#   bench/session-cpu.sh                      # BASE (default: 54bf4dc) against this commit
#   BASE=HEAD~3 ROUNDS=6 SESSIONS=400 bench/session-cpu.sh
#   BASE_BIN=/tmp/a HEAD_BIN=/tmp/b LOAD_BIN=/tmp/load bench/session-cpu.sh   # builds made already
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${BASE:-54bf4dc}
sessions=${SESSIONS:-200}
concurrency=${CONCURRENCY:-16}
rounds=${ROUNDS:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
work=$(mktemp -d "${TMPDIR:-/tmp}/rimthan-session-cpu.XXXXXX")
trap 'rm -rf "$work"; git -C "$repo" worktree remove --force "$work/base" 2>/dev/null || true' EXIT

if [[ -z "${BASE_BIN:-}" || -z "${HEAD_BIN:-}" || -z "${LOAD_BIN:-}" ]]; then
    # The base first: it shares the target folder's dependencies, and this commit's build after
    # it overwrites the workspace's own crates. The registry crate embeds registry/default by
    # absolute path: the base build's embedding must not stand for this one's.
    git -C "$repo" worktree add -q --detach "$work/base" "$base"
    (cd "$work/base" && cargo build -q --release -p rimthan-cli --bin rimthan)
    cp "$CARGO_TARGET_DIR/release/rimthan" "$work/rimthan-base"
    cargo clean -q --release -p rimthan-registry
    (cd "$repo" && cargo build -q --release -p rimthan-cli -p rimthan-stage --bin rimthan --example load)
    cp "$CARGO_TARGET_DIR/release/rimthan" "$work/rimthan-head"
    cp "$CARGO_TARGET_DIR/release/examples/load" "$work/load"
    BASE_BIN=$work/rimthan-base HEAD_BIN=$work/rimthan-head LOAD_BIN=$work/load
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
# One line per thread: name, switches, CPU ticks.
threads() {
    for task in /proc/"$1"/task/*; do
        printf '%s %s %s\n' "$(tr ' ' _ < "$task/comm")" \
            "$(awk '/ctxt_switches/ {s += $2} END {print s}' "$task/status")" \
            "$(awk '{print $14 + $15}' "$task/stat")"
    done 2>/dev/null
}

# Starts a server on core 0 with a fresh SQLite file; prints "PID PORT".
serve() {
    local dir port
    dir=$(mktemp -d "$work/db.XXXXXX")
    port=$(free_port)
    taskset -c 0 "$1" serve --listen "127.0.0.1:$port" \
        --database-url "sqlite://$dir/db.sqlite?mode=rwc" > "$dir/server.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 200); do
        curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break
        sleep 0.05
    done
    echo "$pid $port"
}

drive() { taskset -c 1 "$LOAD_BIN" "http://127.0.0.1:$1/mcp" codex research-study "$concurrency" "$2" > /dev/null; }

tick=$(getconf CLK_TCK)
per_session() { echo "scale=2; $1 / $sessions" | bc; }
ms_per_session() { echo "scale=2; $1 * 1000 / $tick / $sessions" | bc; }

printf '%-6s %-5s %12s %12s\n' round build "ms/session" "switches"
for round in $(seq 1 "$rounds"); do
    if (( round % 2 )); then order=(base head); else order=(head base); fi
    declare -A pid port bin
    bin[base]=$BASE_BIN
    bin[head]=$HEAD_BIN
    for b in "${order[@]}"; do read -r pid[$b] port[$b] < <(serve "${bin[$b]}"); done
    # Warm-up: 32 sessions each, at once.
    warm=()
    for b in "${order[@]}"; do drive "${port[$b]}" 32 & warm+=($!); done
    wait "${warm[@]}"
    declare -A cpu0 sw0 drivers
    for b in "${order[@]}"; do
        cpu0[$b]=$(cpu_ticks "${pid[$b]}")
        sw0[$b]=$(switches "${pid[$b]}")
        threads "${pid[$b]}" > "$work/$b.before"
    done
    for b in "${order[@]}"; do drive "${port[$b]}" "$sessions" & drivers[$b]=$!; done
    for b in "${order[@]}"; do
        wait "${drivers[$b]}"
        cpu=$(( $(cpu_ticks "${pid[$b]}") - cpu0[$b] ))
        sw=$(( $(switches "${pid[$b]}") - sw0[$b] ))
        threads "${pid[$b]}" > "$work/$b.after"
        printf '%-6s %-5s %12s %12s\n' "$round" "$b" "$(ms_per_session "$cpu")" "$(per_session "$sw")"
    done
    for b in "${order[@]}"; do kill "${pid[$b]}"; wait "${pid[$b]}" 2>/dev/null || true; done
done

# The last round's threads, by name: where each build's CPU and switches went.
for b in base head; do
    echo
    echo "$b, by thread (last round):"
    python3 - "$work/$b.before" "$work/$b.after" "$sessions" "$tick" <<'PY'
import collections, sys
def rows(path):
    out = collections.defaultdict(lambda: [0, 0])
    for line in open(path):
        name, sw, cpu = line.split()
        out[name][0] += int(sw)
        out[name][1] += int(cpu)
    return out
before, after = rows(sys.argv[1]), rows(sys.argv[2])
sessions, tick = int(sys.argv[3]), int(sys.argv[4])
for name in sorted(after):
    sw = after[name][0] - before.get(name, [0, 0])[0]
    cpu = after[name][1] - before.get(name, [0, 0])[1]
    print(f"  {name:18} {cpu * 1000 / tick / sessions:7.2f} ms/session {sw / sessions:7.1f} switches/session")
PY
done
