#!/usr/bin/env bash
# Rebuilds the embedded default registry from registry/source with the same command operators
# use. After running it, update DEFAULT_MANIFEST_SHA256 in crates/registry/src/embedded.rs to the
# digest it prints, and commit both.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf registry/default
cargo run --quiet -- registry build registry/source --out registry/default \
  --release 2026.12.0 --key registry/default-release.key --channel stable
