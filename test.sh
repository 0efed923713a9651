#!/usr/bin/env bash
# Runs every test: unit tests, the sqllogictest files (sql-tests/ and the shared acceptance
# cases listed in sql-tests/shared-cases.txt) against a real server, the crash-recovery test
# and the psql test. Installs missing system packages when run as root.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/ensure-deps.sh --test
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
cargo test --workspace "$@"
