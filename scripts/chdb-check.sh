#!/bin/sh
# Checks that the ClickHouse store's schema, with the extras of current
# releases, and every statement the store issues run on a current
# ClickHouse engine: chdb (npm), no server needed. The statements come
# from the code itself (TestEmitSQL records them), so the check follows it.
# The statements of cluster mode (TestEmitClusterSQL: the migrations
# rewritten ON CLUSTER, maintenance on the local tables, …) are parsed
# only: chdb is one embedded engine, without the cluster, ZooKeeper or
# macros they need to run (scripts/chcluster.sh runs them on 18.16).
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
STORMRADIUS_EMIT_SQL="$out/statements.json" STORMRADIUS_EMIT_CLUSTER_SQL="$out/cluster.json" \
	go test -count=1 -run '^TestEmit(Cluster)?SQL$' ./store/clickhouse >/dev/null
NODE_PATH="$CHDB_DIR/node_modules" node scripts/chdb-check.js "$out/statements.json" "$out/cluster.json"
