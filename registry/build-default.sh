#!/usr/bin/env bash
# Appends a release to the embedded default registry: builds registry/source under a new release
# id with the same command operators use, records it in registry/default/published.json (which
# the binary pins) and points `stable` at it. Published releases are never rebuilt or removed: a
# content change is a new release id, and an edited asset needs a new version
# (docs/registry-format.md §1.1). Commit registry/default afterwards.
set -euo pipefail
release="${1:?usage: registry/build-default.sh NEW_RELEASE_ID}"
cd "$(dirname "$0")/.."
if [ -e "registry/default/releases/$release" ]; then
  echo "release $release is already published; choose a new release id" >&2
  exit 1
fi
cargo run --quiet -- registry build registry/source --out registry/default \
  --release "$release" --key registry/default-release.key --channel stable
