#!/usr/bin/env bash
# End-to-end tests of the rimthan MCP server with the official Python MCP SDK.
#   RIMTHAN_BIN=/path/to/rimthan e2e/python/run.sh [extra pytest args]
# RIMTHAN_E2E_VENV picks the virtualenv (default: ~/.cache/rimthan-e2e/python-venv); it is created
# when missing and synced to requirements.lock on every run. Works from any cwd.
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
venv="${RIMTHAN_E2E_VENV:-$HOME/.cache/rimthan-e2e/python-venv}"

if [[ ! -x "$venv/bin/python" ]]; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.lock"

cd "$here"
export PYTHONDONTWRITEBYTECODE=1
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/test_rimthan_e2e.py" "$@"
