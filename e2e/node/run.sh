#!/usr/bin/env bash
# Third-party-client end-to-end tests of the real rimthan binary with software nobody on the team
# wrote: the official TypeScript SDK (@modelcontextprotocol/client v2; Streamable HTTP in the
# legacy era and pinned to 2026-07-28, and stdio) and the MCP Inspector CLI
# (@modelcontextprotocol/inspector v2), and `--auth oidc` against a real OpenID provider (the
# oidc-provider package). Runs `node --test`; its closing summary is the verdict.
#
# Needs: RIMTHAN_BIN (the built binary), npm, and the npm registry for the first `npm ci`.
# Node 22 (the Inspector needs >= 22.19) comes from the npm package node@22, installed locally
# and put first on PATH. Every server the tests start binds 127.0.0.1 and is stopped by them.
set -euo pipefail

: "${RIMTHAN_BIN:?set RIMTHAN_BIN to the rimthan binary (e.g. target/debug/rimthan)}"
[[ -x "$RIMTHAN_BIN" ]] || { echo "RIMTHAN_BIN=$RIMTHAN_BIN is not an executable file" >&2; exit 2; }
RIMTHAN_BIN=$(cd "$(dirname "$RIMTHAN_BIN")" && pwd)/$(basename "$RIMTHAN_BIN")
export RIMTHAN_BIN

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

# npm ci when node_modules is missing or was installed from another package.json/lockfile.
lock_sum=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)
if [[ ! -x node_modules/.bin/node || ! -f node_modules/.rimthan-lock ||
      "$(cat node_modules/.rimthan-lock)" != "$lock_sum" ]]; then
  echo "e2e/node: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > node_modules/.rimthan-lock
fi
export PATH="$here/node_modules/.bin:$PATH"
node_version=$(node --version)
[[ "$node_version" == v22.* ]] || { echo "expected node 22 first on PATH, got $node_version" >&2; exit 2; }
echo "e2e/node: node $node_version, $("$RIMTHAN_BIN" --version 2>/dev/null || echo rimthan)"

exec node --test "test/*.test.mjs"
