#!/bin/sh
# Checks that the ClickHouse store's schema, with the extras of current
# releases, and every statement the store issues run on a current
# ClickHouse engine: chdb (npm), no server needed. The statements come
# from the code itself (TestEmitSQL records them), so the check follows it.
#
#   scripts/chdb-check.sh            # installs chdb@3.4.0 into $CHDB_DIR if missing
#   CHDB_DIR=/opt/chdb scripts/chdb-check.sh
set -eu
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
CHDB_DIR=${CHDB_DIR:-/tmp/chdb}
if [ ! -d "$CHDB_DIR/node_modules/chdb" ]; then
	echo "chdb-check: installing chdb@3.4.0 into $CHDB_DIR (about 540 MB)"
	mkdir -p "$CHDB_DIR"
	(cd "$CHDB_DIR" && npm install --no-audit --no-fund chdb@3.4.0 >/dev/null)
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
STORMRADIUS_EMIT_SQL="$out/statements.json" go test -count=1 -run '^TestEmitSQL$' ./store/clickhouse >/dev/null
NODE_PATH="$CHDB_DIR/node_modules" node scripts/chdb-check.js "$out/statements.json"
