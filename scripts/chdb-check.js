// Runs the statements the ClickHouse store issues (a JSON array of SQL
// strings, from `go test ./store/clickhouse -run '^TestEmitSQL$'` with
// STORMRADIUS_EMIT_SQL set) on chdb, a current ClickHouse engine, one by
// one, in one session; the first error fails the check with the statement.
// A second file (TestEmitClusterSQL's, STORMRADIUS_EMIT_CLUSTER_SQL) holds
// the statements of cluster mode: those are parsed (formatQuery), not run,
// as chdb has no cluster.
// Usage: node scripts/chdb-check.js statements.json [cluster.json]  (chdb
// resolvable, e.g. NODE_PATH=/tmp/chdb/node_modules)
"use strict";
const fs = require("fs");
const { Session } = require("chdb");

const file = process.argv[2];
if (!file) {
  console.error("usage: node chdb-check.js statements.json");
  process.exit(2);
}
const statements = JSON.parse(fs.readFileSync(file, "utf8"));
const session = new Session();
let ok = 0;
try {
  const version = session.query("SELECT version()", "TSVRaw").trim();
  for (const [i, sql] of statements.entries()) {
    try {
      session.query(sql, "CSV");
      ok++;
    } catch (e) {
      console.error(`chdb-check: statement ${i + 1} of ${statements.length} failed on ClickHouse ${version}:\n${sql}\n\n${e.message}`);
      process.exit(1);
    }
  }
  // The schema has its current-release extras.
  const ddl = session.query("SHOW CREATE TABLE records", "TSVRaw");
  for (const want of ["LowCardinality(String)", "CODEC(ZSTD(1))", "bloom_filter", "TTL day", "ttl_only_drop_parts"]) {
    if (!ddl.includes(want)) {
      console.error(`chdb-check: records has no ${want} on ClickHouse ${version}:\n${ddl}`);
      process.exit(1);
    }
  }
  // The rollups the statements kept (deltas, and a bucket recomputed
  // under a new generation) agree with the records they sum (one trace
  // received each), in all
  // three tiers, counting each bucket's current generation of every
  // analysis partition (its latest, or its base: 0 or 2^63 and more).
  const one = (q) => session.query(q, "TSVRaw").trim();
  const live = one("SELECT count() FROM (SELECT deleted FROM records FINAL) WHERE deleted = 0");
  const current = "(((gen = 0 OR gen >= 9223372036854775808) AND (tier, bucket, gen) NOT IN (SELECT tier, bucket, base FROM rollup_gens_by_part)) OR " +
    "(tier, bucket, gen) IN (SELECT tier, bucket, argMax(gen, version) FROM rollup_gens_by_part GROUP BY tier, bucket, part))";
  if (one("SELECT count() FROM rollup_gens_by_part") === "0") {
    console.error(`chdb-check: no bucket was recomputed on ClickHouse ${version}`);
    process.exit(1);
  }
  for (const tier of [0, 1, 2]) {
    // Traces received: the traces figure less what sampling weights
    // added to it (traces_excess; docs/SPEC.md §4.9).
    const got = one(`SELECT sumIf(n, stat = 'traces') - sumIf(n, stat = 'traces_excess') FROM rollups WHERE tier = ${tier} AND ${current}`);
    if (got !== live || live === "0") {
      console.error(`chdb-check: tier ${tier} rollups count ${got} traces, the records ${live}, on ClickHouse ${version}`);
      process.exit(1);
    }
  }
  console.log(`chdb-check: ${ok} statements ran on ClickHouse ${version} (chdb)`);
  // Cluster mode's statements parse: formatQuery parses its argument
  // as a statement without running it.
  if (process.argv[3]) {
    const cluster = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
    const lit = (s) => "'" + s.replace(/\\/g, "\\\\").replace(/'/g, "\\'") + "'";
    let parsed = 0;
    for (const [i, sql] of cluster.entries()) {
      // An insert's data is not SQL: its statement ends at VALUES.
      const head = sql.replace(/\sVALUES[\s\S]*$/, " VALUES");
      try {
        session.query(`SELECT formatQuery(${lit(head)})`, "TSVRaw");
        parsed++;
      } catch (e) {
        console.error(`chdb-check: cluster statement ${i + 1} of ${cluster.length} does not parse on ClickHouse ${version}:\n${sql}\n\n${e.message}`);
        process.exit(1);
      }
    }
    const ddl = cluster.filter((q) => q.includes("ON CLUSTER")).length;
    if (ddl === 0) {
      console.error("chdb-check: no ON CLUSTER statement among the cluster statements");
      process.exit(1);
    }
    console.log(`chdb-check: ${parsed} statements of cluster mode (${ddl} ON CLUSTER) parse on ClickHouse ${version} (chdb)`);
  }
} finally {
  session.cleanup();
}
