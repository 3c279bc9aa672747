#!/usr/bin/env bash
# The real host CLIs against rimthan, offline: Claude Code and Codex at the versions pinned in
# package-lock.json, each with its own scratch HOME / CODEX_HOME, telemetry and auto-update off,
# and a scripted model endpoint on loopback where a host needs a model to act.
#   RIMTHAN_BIN=/path/to/rimthan e2e/hosts/run.sh [extra node --test args]
# Works from any cwd. When unshare is allowed, the tests run in a network namespace with
# loopback only, so neither host can reach anything but the servers the tests start.
set -euo pipefail

: "${RIMTHAN_BIN:?set RIMTHAN_BIN to the built rimthan binary}"
case "$RIMTHAN_BIN" in
  /*) ;;
  *) RIMTHAN_BIN="$PWD/$RIMTHAN_BIN" ;;
esac
if [[ ! -x "$RIMTHAN_BIN" ]]; then
  echo "run.sh: RIMTHAN_BIN=$RIMTHAN_BIN is not an executable file" >&2
  exit 2
fi
export RIMTHAN_BIN

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# npm 11 does not run Claude Code's postinstall; its native binary works without it.
npm ci --no-audit --no-fund --loglevel=error

tests=(node --test --test-concurrency=1 "$@" test/*.test.mjs)
if unshare -n --map-root-user ip link set lo up 2>/dev/null; then
  exec unshare -n --map-root-user bash -c 'ip link set lo up && exec "$@"' bash "${tests[@]}"
fi
echo "run.sh: no network namespace here; the hosts' own update and telemetry calls stay off by env" >&2
exec "${tests[@]}"
