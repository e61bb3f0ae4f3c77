// Package oteltable is a test fixture for ingest/chsource: the traces table of
// the OpenTelemetry Collector's clickhouseexporter, created from the
// exporter's own DDL (testdata/, provenance in testdata/README.md) and
// filled with rows converted from pdata as that exporter version converts
// them. Only tests import it.
//
// The tables need a current ClickHouse engine (Map, Nested, DateTime64,
// JSON): chtest.Current's, not Debian's 18.16.
package oteltable

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Shape names one version of the exporter's traces table: its DDL and the
// way that version writes a span as a row.
type Shape string

const (
	// V0165 is clickhouseexporter v0.165.1 with its defaults (json: false):
	// attributes in Map(LowCardinality(String), String) columns, values
	// through pcommon.Value.AsString; ScopeName and ScopeVersion columns;
	// Duration UInt64; SpanKind "Server", "Client", ...; StatusCode
	// "Unset", "Ok", "Error"; ZSTD(3) codecs; the companion
	// <table>_trace_id_ts (Start, End DateTime) and its materialized view.
	V0165 Shape = "v0.165.1"
	// V0165JSON is clickhouseexporter v0.165.1 with json: true: attributes
	// (of spans, resources, events and links) in JSON columns, written as
	// encoding/json of the attributes' raw values, so they keep their types;
	// ResourceAttributesKeys and SpanAttributesKeys list the flattened
	// keys. Otherwise as V0165, the companion table and view included.
	V0165JSON Shape = "v0.165.1-json"
	// V07x is the table of the exporter before ScopeName and ScopeVersion
	// became columns (contrib PR #21919): no scope columns, the scope's
	// name and version in SpanAttributes as otel.scope.name and
	// otel.scope.version; Duration Int64; SpanKind "SPAN_KIND_SERVER", ...
	// and StatusCode "STATUS_CODE_ERROR", ... (traceutil.SpanKindStr,
	// StatusCodeStr); ServiceName only from a string service.name; ZSTD(1);
	// ORDER BY (ServiceName, SpanName, toUnixTimestamp(Timestamp), TraceId);
	// <table>_trace_id_ts with Start, End DateTime64(9) and no partitions.
	V07x Shape = "v0.7x"
)

// Shapes lists every shape, the newest first.
var Shapes = []Shape{V0165, V0165JSON, V07x}

//go:embed testdata/v0.165.1/*.sql testdata/v0.7x/*.sql
var ddlFiles embed.FS

// ddl lists a shape's DDL files in the order the exporter runs them: the
// traces table, the trace-id table, the materialized view.
var ddl = map[Shape][]string{
	V0165: {"v0.165.1/traces_table.sql", "v0.165.1/traces_id_ts_lookup_table.sql",
		"v0.165.1/traces_id_ts_lookup_mv.sql"},
	V0165JSON: {"v0.165.1/traces_json_table.sql", "v0.165.1/traces_id_ts_lookup_table.sql",
		"v0.165.1/traces_id_ts_lookup_mv.sql"},
	V07x: {"v0.7x/traces_table.sql", "v0.7x/traces_id_ts_table.sql", "v0.7x/traces_id_ts_mv.sql"},
}

// identifier is what Create and Insert take as a database or table name:
// the DDL puts names between double quotes (v0.165.1) or bare (v0.7x).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkNames(db, table string) error {
	for _, n := range []string{db, table} {
		if !identifier.MatchString(n) {
			return fmt.Errorf("oteltable: %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)", n)
		}
	}
	return nil
}

// Statements returns the shape's DDL for table in database db: CREATE
// DATABASE IF NOT EXISTS (as the exporter runs for a database other than
// "default"), the traces table, the trace-id table and its materialized
// view, each with the exporter's default settings (MergeTree(), no
// cluster, no TTL).
func Statements(db, table string, shape Shape) ([]string, error) {
	if err := checkNames(db, table); err != nil {
		return nil, err
	}
	files, ok := ddl[shape]
	if !ok {
		return nil, fmt.Errorf("oteltable: unknown shape %q (known: %v)", shape, Shapes)
	}
	var out []string
	if db != "default" {
		out = append(out, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %q", db))
	}
	r := strings.NewReplacer("{db}", db, "{table}", table)
	for _, f := range files {
		b, err := ddlFiles.ReadFile("testdata/" + f)
		if err != nil {
			return nil, fmt.Errorf("oteltable: %w", err)
		}
		// The v0.7x statements end in a semicolon, which one statement over
		// HTTP does not need.
		out = append(out, strings.TrimRight(strings.TrimSpace(r.Replace(string(b))), ";"))
	}
	return out, nil
}

// Create creates table in database db as the exporter of that shape does:
// the database, the traces table, <table>_trace_id_ts and
// <table>_trace_id_ts_mv. Running it again changes nothing (IF NOT EXISTS).
func Create(ctx context.Context, conn driver.Conn, db, table string, shape Shape) error {
	stmts, err := Statements(db, table, shape)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("oteltable: create %s.%s (%s): %w", db, table, shape, err)
		}
	}
	return nil
}
