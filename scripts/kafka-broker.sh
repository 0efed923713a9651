#!/usr/bin/env bash
# A Kafka-protocol broker for tests: tansu (https://crates.io/crates/tansu), in-memory storage.
#
#   scripts/kafka-broker.sh install           builds tansu into $WEIR_TOOLS (default /var/tmp/weir-tools)
#                                             unless that version is there (a release build: ~14 min on 2 cores)
#   scripts/kafka-broker.sh start PORT DIR    starts it on 127.0.0.1:PORT, log and pid file in DIR; waits
#                                             until it accepts connections (30 s at most) and prints its pid
#   scripts/kafka-broker.sh stop [DIR]        stops the broker started with DIR (default: the last started)
#   scripts/kafka-broker.sh path              prints the binary's path
#
# tansu keeps messages in memory (memory:// needs the dynostore feature), does not create topics on
# first use (create them with an admin client), has no transactions, and needs librdkafka >= 2.12
# (Debian's kcat cannot talk to it).
set -euo pipefail

TANSU_VERSION=0.6.0
TOOLS="${WEIR_TOOLS:-/var/tmp/weir-tools}"
TANSU="$TOOLS/bin/tansu"
LAST="$TOOLS/kafka-broker.last"

installed() {
  [[ -x "$TANSU" ]] && [[ "$("$TANSU" --version 2>/dev/null)" == *"$TANSU_VERSION"* ]]
}

case "${1:-}" in
  install)
    if installed; then
      echo "tansu $TANSU_VERSION is installed at $TANSU"
      exit 0
    fi
    echo "building tansu $TANSU_VERSION into $TOOLS (about 14 minutes on 2 cores) ..." >&2
    start=$(date +%s)
    # Its own target directory: never the workspace's.
    CARGO_TARGET_DIR="$TOOLS/target" cargo install tansu --version "$TANSU_VERSION" --locked \
      --features dynostore --root "$TOOLS"
    rm -rf "$TOOLS/target"
    echo "tansu installed in $(( $(date +%s) - start )) s" >&2
    ;;
  start)
    port="${2:?usage: $0 start PORT DIR}"
    dir="${3:?usage: $0 start PORT DIR}"
    installed || { echo "tansu is not installed: run $0 install" >&2; exit 1; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    setsid "$TANSU" broker \
      --listener-url "tcp://127.0.0.1:$port" \
      --advertised-listener-url "tcp://127.0.0.1:$port" \
      --storage-engine memory://tansu/ >"$dir/tansu.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/tansu.pid"
    mkdir -p "$TOOLS" && echo "$dir" >"$LAST"
    deadline=$(( $(date +%s) + 30 ))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "tansu exited; its log:" >&2; cat "$dir/tansu.log" >&2; exit 1
      fi
      if (( $(date +%s) >= deadline )); then
        echo "tansu does not accept connections on 127.0.0.1:$port after 30 s; its log:" >&2
        cat "$dir/tansu.log" >&2; kill "$pid" 2>/dev/null || true; exit 1
      fi
      sleep 0.05
    done
    echo "$pid"
    ;;
  stop)
    dir="${2:-$(cat "$LAST" 2>/dev/null || true)}"
    [[ -n "$dir" && -f "$dir/tansu.pid" ]] || { echo "no broker started (no pid file)" >&2; exit 0; }
    pid="$(cat "$dir/tansu.pid")"
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/tansu.pid"
    ;;
  path)
    echo "$TANSU"
    ;;
  *)
    echo "usage: $0 install | start PORT DIR | stop [DIR] | path" >&2
    exit 2
    ;;
esac
