#!/usr/bin/env bash
# Runs the official MCP conformance suite against the real rimthan binary:
#   1. @modelcontextprotocol/conformance 0.1.16 (legacy era, initialize handshake), `--suite all`,
#      with baseline-legacy.yml;
#   2. @modelcontextprotocol/conformance 0.2.0-alpha.12 `--requirements 2026-07-28`,
#      with baseline-2026-07-28.yml.
# Both baselines are strict (a stale entry fails too). Exits non-zero if either suite fails.
#
# Needs: RIMTHAN_BIN (the built binary), npm, and the npm registry for the first `npm ci`.
# The suites need Node >= 22: the npm package node@22 is installed locally and put first on PATH.
# Results (checks.json per scenario, server log) go to $CONFORMANCE_RESULTS (default ./results).
set -euo pipefail

: "${RIMTHAN_BIN:?set RIMTHAN_BIN to the rimthan binary (e.g. target/debug/rimthan)}"
[[ -x "$RIMTHAN_BIN" ]] || { echo "RIMTHAN_BIN=$RIMTHAN_BIN is not an executable file" >&2; exit 2; }
RIMTHAN_BIN=$(cd "$(dirname "$RIMTHAN_BIN")" && pwd)/$(basename "$RIMTHAN_BIN")

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# --- node 22 and the suites (npm ci when node_modules is missing or stale) ---------------------
lock_sum=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)
if [[ ! -x node_modules/.bin/node || ! -f node_modules/.rimthan-lock ||
      "$(cat node_modules/.rimthan-lock)" != "$lock_sum" ]]; then
  echo "conformance: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > node_modules/.rimthan-lock
fi
export PATH="$here/node_modules/.bin:$PATH"
node_version=$(node --version)
[[ "$node_version" == v22.* ]] || { echo "expected node 22 first on PATH, got $node_version" >&2; exit 2; }

results=${CONFORMANCE_RESULTS:-$here/results}
rm -rf "$results"
mkdir -p "$results"
work=$(mktemp -d "${TMPDIR:-/tmp}/rimthan-conformance.XXXXXX")

# --- the server: 127.0.0.1, a free port, its own SQLite file; stopped on exit ------------------
server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
cleanup() { stop_server; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

start_server() {
  local attempt port
  for attempt in 1 2 3; do
    port=$(free_port)
    "$RIMTHAN_BIN" serve --listen "127.0.0.1:$port" "$@" \
      --database-url "sqlite://$work/db-$attempt-$SECONDS.sqlite" >>"$results/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 150); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if [[ "$(node -e 'fetch(process.argv[1]).then(r=>console.log(r.status),()=>console.log(0))' \
               "http://127.0.0.1:$port/readyz")" == 200 ]]; then
        url="http://127.0.0.1:$port/mcp"
        return 0
      fi
      sleep 0.2
    done
    echo "conformance: server did not become ready (attempt $attempt); log:" >&2
    tail -n 20 "$results/server.log" >&2 || true
    stop_server
  done
  return 1
}

url=""
# The legacy-era suite judges the full 2025-11-25 machinery: Mcp-Session-Id sessions and SSE.
start_server --legacy-sessions
echo "conformance: rimthan $("$RIMTHAN_BIN" --version 2>/dev/null || true) at $url (--legacy-sessions), node $node_version"

# --- 1. legacy era ------------------------------------------------------------------------------
legacy_rc=0
node node_modules/conformance-legacy/dist/index.js server --url "$url" --suite all \
  --expected-failures baseline-legacy.yml -o "$results/legacy" 2>&1 | tee "$results/legacy.log" ||
  legacy_rc=${PIPESTATUS[0]}
echo "conformance-legacy (0.1.16 --suite all): exit $legacy_rc"
stop_server

# The 2026-07-28 suite judges the default configuration (stateless, plain JSON answers).
start_server
echo "conformance: rimthan at $url (default configuration)"

# --- 2. 2026-07-28 requirements -------------------------------------------------------------------
modern_rc=0
node node_modules/conformance-2026/dist/index.js server --url "$url" --requirements 2026-07-28 \
  --expected-failures baseline-2026-07-28.yml -o "$results/2026-07-28" 2>&1 | tee "$results/2026-07-28.log" ||
  modern_rc=${PIPESTATUS[0]}
echo "conformance-2026 (0.2.0-alpha.12 --requirements 2026-07-28): exit $modern_rc"

stop_server

# The scenarios 2026-07-28 scores (the suite also runs unscored extension/pending ones).
node node_modules/conformance-2026/dist/index.js list --requirements 2026-07-28 --server |
  awk '/^Server scenarios/{on=1; next} /^$/{on=0} on && /^  - /{print $2}' > "$results/scored-2026-07-28.txt"
[[ -s "$results/scored-2026-07-28.txt" ]] || { echo "could not read the 2026-07-28 scored scenario list" >&2; exit 1; }

echo
echo "=== conformance summary ==="
summary_rc=0
node summarize.mjs conformance-legacy "$results/legacy" baseline-legacy.yml > "$results/summary-legacy.txt" || summary_rc=1
node summarize.mjs conformance-2026-07-28 "$results/2026-07-28" baseline-2026-07-28.yml \
  "$results/scored-2026-07-28.txt" > "$results/summary-2026.txt" || summary_rc=1
grep -v '^conformance: ' "$results/summary-legacy.txt" "$results/summary-2026.txt" | sed 's/^[^:]*\.txt://' || true
if (( legacy_rc != 0 || modern_rc != 0 || summary_rc != 0 )); then
  echo "conformance: FAILED (legacy exit $legacy_rc, 2026-07-28 exit $modern_rc); results in $results"
fi
grep -h '^conformance: ' "$results/summary-legacy.txt" "$results/summary-2026.txt"
(( legacy_rc == 0 && modern_rc == 0 && summary_rc == 0 ))
