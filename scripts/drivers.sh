#!/usr/bin/env bash
# The Postgres clients the driver tests run (tests/drivers.rs), installed once into
# $WEIR_TOOLS/drivers (default /var/tmp/weir-tools/drivers), outside the clone:
#   Python (a venv): psycopg 3, psycopg2, SQLAlchemy 2, pandas, asyncpg, pgcli
#   Node.js: node-postgres (pg)
#   Java: pgjdbc, Debian's libpostgresql-jdbc-java (installed with apt-get when run as root)
#
#   scripts/drivers.sh install    installs what is missing (about 2 minutes the first time)
#   scripts/drivers.sh env        prints the variables the tests read (WEIR_DRIVERS_PYTHON, ...)
set -euo pipefail

TOOLS="${WEIR_TOOLS:-/var/tmp/weir-tools}"
DIR="$TOOLS/drivers"
# Versions the tests were written against; bump them together with the tests.
PY_PACKAGES=(
  "psycopg[binary]==3.2.3"
  "psycopg2-binary==2.9.10"
  "SQLAlchemy==2.0.36"
  "pandas==2.2.3"
  "asyncpg==0.30.0"
  "pgcli==4.1.0"
)
NODE_PACKAGES=("pg@8.13.1")
JDBC_JAR=/usr/share/java/postgresql.jar
STAMP="$DIR/installed-v1"

case "${1:-}" in
  install)
    if [[ ! -f "$JDBC_JAR" ]]; then
      if [[ $(id -u) -eq 0 ]]; then
        echo "installing libpostgresql-jdbc-java ..." >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpostgresql-jdbc-java >/dev/null
      else
        echo "the JDBC test needs Debian's libpostgresql-jdbc-java: sudo apt-get install -y libpostgresql-jdbc-java" >&2
      fi
    fi
    if [[ -f "$STAMP" ]]; then
      echo "drivers are installed in $DIR"
      exit 0
    fi
    start=$(date +%s)
    mkdir -p "$DIR"
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"
    mkdir -p "$DIR/node"
    (cd "$DIR/node" && npm install --silent --no-audit --no-fund "${NODE_PACKAGES[@]}" >/dev/null)
    touch "$STAMP"
    echo "drivers installed in $DIR in $(( $(date +%s) - start )) s" >&2
    ;;
  env)
    echo "WEIR_DRIVERS_PYTHON=$DIR/venv/bin/python"
    echo "WEIR_DRIVERS_NODE_PATH=$DIR/node/node_modules"
    echo "WEIR_DRIVERS_JDBC=$JDBC_JAR"
    ;;
  *)
    echo "usage: $0 install|env" >&2
    exit 2
    ;;
esac
