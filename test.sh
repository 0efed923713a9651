#!/usr/bin/env bash
# Runs every test: unit tests, the sqllogictest files (sql-tests/ and the shared acceptance
# cases listed in sql-tests/shared-cases.txt) against a real server, the crash-recovery tests,
# the psql and driver tests (psycopg, SQLAlchemy, asyncpg, pgcli, node-postgres, pgjdbc:
# installed by scripts/drivers.sh), the web page in headless Chromium, the Nexmark check and the
# Kafka tests against a real Kafka-protocol broker (tansu, built once into
# /var/tmp/weir-tools: about 14 minutes on a fresh machine). Installs missing system packages
# when run as root.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/ensure-deps.sh --test
bash scripts/kafka-broker.sh install
bash scripts/drivers.sh install
export WEIR_REQUIRE_KAFKA=1
export WEIR_REQUIRE_DRIVERS=1
export WEIR_REQUIRE_CHROMIUM=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
cargo test --workspace "$@"
