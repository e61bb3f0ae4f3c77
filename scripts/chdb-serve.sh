#!/usr/bin/env bash
# A current ClickHouse engine served over ClickHouse's HTTP interface for
# the ClickHouse store's tests (store/clickhouse TestCurrentEngine*): chdb
# (npm's chdb@3.4.0, ClickHouse 26.7 as a library), embedded in
# scripts/chdbhttp, which answers as much of the HTTP interface as
# clickhouse-go's HTTP protocol uses. Everything lives under one directory
# (the binary, the engine's data, its log and pid); nothing else is
# touched.
#
#   scripts/chdb-serve.sh start   # prints the line for the tests:
#                                 # STORMRADIUS_TEST_CLICKHOUSE_CURRENT=http://127.0.0.1:28123/
#   scripts/chdb-serve.sh stop    # stops what start started, removes the directory
#   scripts/chdb-serve.sh status
#
# CHDB_DIR (default /tmp/chdb, as scripts/chdb-check.sh) is where chdb is
# installed when missing (about 540 MB); CHDBHTTP_DIR (default
# /tmp/stormradius-chdbhttp) and CHDBHTTP_PORT (default 28123) move the
# server. start is idempotent: a server already answering is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="/usr/local/go/bin:$PATH"

CHDB_DIR=${CHDB_DIR:-/tmp/chdb}
DIR=${CHDBHTTP_DIR:-/tmp/stormradius-chdbhttp}
PORT=${CHDBHTTP_PORT:-28123}
LIB="$CHDB_DIR/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"
URL="http://127.0.0.1:$PORT/"

# get PATH: the body of the server's answer to GET PATH (bash's /dev/tcp:
# no curl needed).
get() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT && printf 'GET %s HTTP/1.0\r\n\r\n' '$1' >&3 && cat <&3" 2>/dev/null |
		sed '1,/^\r$/d'
}

# ok: the server answers its ping.
ok() { [ "$(get /ping)" = "Ok." ]; }

start() {
	if ok; then
		echo "STORMRADIUS_TEST_CLICKHOUSE_CURRENT=$URL"
		return 0
	fi
	if [ ! -f "$LIB" ]; then
		echo "chdb-serve: installing chdb@3.4.0 into $CHDB_DIR (about 540 MB)" >&2
		mkdir -p "$CHDB_DIR"
		(cd "$CHDB_DIR" && npm install --no-audit --no-fund chdb@3.4.0 >/dev/null)
	fi
	mkdir -p "$DIR"
	rm -rf "$DIR/data"
	(cd scripts/chdbhttp && CGO_ENABLED=0 go build -o "$DIR/chdbhttp" .)
	nohup "$DIR/chdbhttp" -lib "$LIB" -addr "127.0.0.1:$PORT" -data "$DIR/data" \
		>"$DIR/chdbhttp.out" 2>"$DIR/chdbhttp.log" </dev/null &
	echo $! >"$DIR/pid"
	for _ in $(seq 60); do
		if ok; then
			echo "STORMRADIUS_TEST_CLICKHOUSE_CURRENT=$URL"
			return 0
		fi
		if ! kill -0 "$(cat "$DIR/pid")" 2>/dev/null; then
			break
		fi
		sleep 0.5
	done
	echo "chdb-serve: chdbhttp did not answer on $URL:" >&2
	tail -20 "$DIR/chdbhttp.log" >&2
	exit 1
}

stop() {
	stop_pid "$DIR/pid" 20
	rm -rf "$DIR"
}

status() {
	if ok; then
		echo "chdbhttp answers on $URL: ClickHouse $(get '/?query=SELECT+version()')"
	else
		echo "chdbhttp does not answer on $URL"
		return 1
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
