#!/usr/bin/env bash
# Builds Weir (release) and starts the server on the embedded default: state in ./weir-data,
# Postgres wire on 127.0.0.1:5488, the web page of the running jobs and /metrics on
# http://127.0.0.1:5489. Connect with: psql -h 127.0.0.1 -p 5488 -U weir
# Extra arguments go to `weir serve` (see `weir serve --help`).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/ensure-deps.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
exec cargo run --release --bin weir -- serve "$@"
