#!/usr/bin/env bash
# Does a heavy ad-hoc SELECT in one session delay another session? Starts `weir serve` on a
# scratch database, then times `psql -c 'SELECT 1'` (a new connection each time: startup,
# handshake, one query, exit), one every 100 ms: first for --seconds with nothing else running,
# then for --seconds while one session runs a three-way cross join of a 1000-row table (1 G
# rows, seconds of CPU on every core DataFusion uses). Prints p50/p99/max of both phases and the
# heavy query's own time. Each sample includes psql's process start, so compare the two phases,
# not the figures with a driver's.
#
#   bench/heavy-select.sh [--seconds N] [--port P]     (WEIR=path/to/weir, default: the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10
port=55488
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        *) echo "usage: $0 [--seconds N] [--port P]" >&2; exit 2 ;;
    esac
done
weir="${WEIR:-${CARGO_TARGET_DIR:-/var/tmp/weir-target}/release/weir}"
[ -x "$weir" ] || { echo "no $weir: cargo build --release --bin weir first (or set WEIR)" >&2; exit 1; }
data=$(mktemp -d /var/tmp/weir-bench-heavy.XXXXXX)
"$weir" serve --data-dir "$data" --pg-listen "127.0.0.1:$port" --http-listen off >"$data.log" 2>&1 &
server=$!
heavy=""
cleanup() {
    [ -n "$heavy" ] && kill "$heavy" 2>/dev/null || true
    kill "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$data" "$data.log" "$data.heavy"
}
trap cleanup EXIT

q() { psql -X -q -A -t -h 127.0.0.1 -p "$port" -U weir -d weir "$@"; }
deadline=$(( $(date +%s) + 60 ))
until q -c 'SELECT 1' >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "the server did not start:" >&2; cat "$data.log" >&2; exit 1; }
    sleep 0.1
done
q -c "CREATE TABLE tbig (x BIGINT)" -c "INSERT INTO tbig SELECT value FROM range(1000)" >/dev/null

# Times `SELECT 1` on a new connection every 100 ms for $seconds; prints the sorted samples (ms).
sample() {
    local end=$(( $(date +%s%N) + seconds * 1000000000 ))
    while [ "$(date +%s%N)" -lt "$end" ]; do
        local t0 t1 out
        t0=$(date +%s%N)
        out=$(q -c 'SELECT 1')
        t1=$(date +%s%N)
        [ "$out" = 1 ] || { echo "SELECT 1 returned '$out'" >&2; exit 1; }
        echo $(( (t1 - t0) / 1000 ))
        sleep 0.1
    done | sort -n
}
# p50, p99 and max of sorted microsecond samples on stdin, in ms.
summary() {
    awk '{ v[NR] = $1 } END {
        p50 = v[int(NR * 0.50 + 0.999)]; p99 = v[int(NR * 0.99 + 0.999)];
        printf "%d connections, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", NR, p50 / 1000, p99 / 1000, v[NR] / 1000 }'
}

echo "idle:       $(sample | summary)"
heavy_sql="SELECT sum(a.x * b.x + c.x) FROM tbig a, tbig b, tbig c"
( start=$(date +%s%N); q -c "$heavy_sql" >/dev/null; echo $(( ($(date +%s%N) - start) / 1000000 )) >"$data.heavy" ) &
heavy=$!
# Sample only while the heavy query is running: wait until the server says it is active.
until [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT sum(a.x%'")" = 1 ]; do
    [ -s "$data.heavy" ] && { echo "the heavy query ended before sampling began" >&2; exit 1; }
    sleep 0.05
done
busy=$(sample | summary)
if [ -s "$data.heavy" ]; then
    echo "busy:       $busy (the heavy query ended before the phase did: raise its size)"
else
    echo "busy:       $busy (the heavy query ran throughout)"
fi
wait "$heavy"
heavy=""
echo "heavy query: $(cat "$data.heavy") ms ($heavy_sql)"
