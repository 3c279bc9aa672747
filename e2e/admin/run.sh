#!/usr/bin/env bash
# Headless-browser end-to-end test of the facilitator's /admin view of the real rimthan binary:
# Playwright (playwright-core) drives Debian's chromium against a `rimthan serve --auth tokens`
# holding sessions staged by `rimthan stage`, and axe-core judges each page's accessibility.
# Runs `node --test`; its closing summary is the verdict. Full-page screenshots of the session
# list, one session and the workflow page go to $RIMTHAN_ARTIFACTS_DIR/admin (default:
# target/ci-artifacts/admin in this clone).
#
# Needs: RIMTHAN_BIN (the built binary), npm and the npm registry for the first `npm ci`, and
# /usr/bin/chromium (installed with apt-get when missing: needs root and Debian's archive).
# Node 22 (@axe-core/playwright declares >= 22.12) comes from the npm package node@22, installed
# locally and put first on PATH. Every server the test starts binds 127.0.0.1 and is stopped by it.
set -euo pipefail

: "${RIMTHAN_BIN:?set RIMTHAN_BIN to the rimthan binary (e.g. target/release/rimthan)}"
[[ -x "$RIMTHAN_BIN" ]] || { echo "RIMTHAN_BIN=$RIMTHAN_BIN is not an executable file" >&2; exit 2; }
RIMTHAN_BIN=$(cd "$(dirname "$RIMTHAN_BIN")" && pwd)/$(basename "$RIMTHAN_BIN")
export RIMTHAN_BIN

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$here"

# Debian's chromium: Playwright's own browser download is neither wanted nor reachable.
chromium=/usr/bin/chromium
if [[ ! -x "$chromium" ]]; then
  [[ $(id -u) == 0 ]] || { echo "e2e/admin: $chromium is missing; install Debian's chromium package as root" >&2; exit 2; }
  echo "e2e/admin: apt-get install chromium" >&2
  apt_log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >"$apt_log" 2>&1; then
    cat "$apt_log" >&2
    exit 2
  fi
  rm -f "$apt_log"
fi
export RIMTHAN_CHROMIUM="$chromium"

# npm ci when node_modules is missing or was installed from another package.json/lockfile.
lock_sum=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)
if [[ ! -x node_modules/.bin/node || ! -f node_modules/.rimthan-lock ||
      "$(cat node_modules/.rimthan-lock)" != "$lock_sum" ]]; then
  echo "e2e/admin: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > node_modules/.rimthan-lock
fi
export PATH="$here/node_modules/.bin:$PATH"
node_version=$(node --version)
[[ "$node_version" == v22.* ]] || { echo "expected node 22 first on PATH, got $node_version" >&2; exit 2; }

artifacts="${RIMTHAN_ARTIFACTS_DIR:-$repo/target/ci-artifacts}/admin"
mkdir -p "$artifacts"
export RIMTHAN_ADMIN_SCREENSHOTS="$artifacts"
echo "e2e/admin: node $node_version, $("$chromium" --version 2>/dev/null || echo chromium), $("$RIMTHAN_BIN" --version 2>/dev/null || echo rimthan)"

status=0
node --test --test-concurrency=1 admin.test.mjs sign_off.test.mjs || status=$?
echo "e2e/admin: screenshots in $artifacts"
exit "$status"
