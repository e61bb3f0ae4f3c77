package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The tests serve one engine (a process has one) to clickhouse-go's HTTP
// protocol, from the libchdb.so CHDB_LIB names.
var testURL string

func TestMain(m *testing.M) {
	lib := os.Getenv("CHDB_LIB")
	if lib == "" {
		fmt.Println("chdbhttp: set CHDB_LIB=/tmp/chdb/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so to run the tests")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "chdbhttp-test-")
	if err != nil {
		panic(err)
	}
	e, err := openEngine(lib, dir)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(&server{e: e, log: slog.New(slog.DiscardHandler), version: "test", maxBody: 1 << 30, tmp: dir})
	testURL = srv.URL
	code := m.Run()
	srv.Close()
	e.close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// connect returns a clickhouse-go connection over HTTP to database db.
func connect(t *testing.T, db string, params string) driver.Conn {
	t.Helper()
	if testURL == "" {
		t.Skip("set CHDB_LIB to libchdb.so")
	}
	o, err := ch.ParseDSN(testURL + "/" + db + params)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// clickhouse-go's handshake over HTTP reads the hello at its own revision
// and the rest at the one the hello gives: both decode.
func TestHello(t *testing.T) {
	conn := connect(t, "default", "")
	v, err := conn.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Version.Major < 22 || v.Revision != 0 {
		t.Errorf("server version %+v: want a current release at revision 0", v)
	}
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// An insert of any number of columns (13: a Native block then starts
// with a carriage return) and types comes back as it went.
func TestInsert(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, "default", "")
	mustExec(t, conn, "DROP TABLE IF EXISTS wide")
	var cols, defs []string
	for i := range 13 {
		cols = append(cols, fmt.Sprintf("c%d", i))
	}
	types := []string{"UInt8", "Int64", "String", "FixedString(16)", "DateTime", "Date", "LowCardinality(String)",
		"Array(UInt64)", "Enum8('a' = 1, 'b' = 2)", "Nullable(Float64)", "UInt64", "String", "Int32"}
	for i, c := range cols {
		defs = append(defs, c+" "+types[i])
	}
	mustExec(t, conn, "CREATE TABLE wide ("+strings.Join(defs, ", ")+") ENGINE = MergeTree ORDER BY c0")
	b, err := conn.PrepareBatch(ctx, "INSERT INTO wide ("+strings.Join(cols, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f := 1.5
	for i := range 3 {
		if err := b.Append(uint8(i), int64(-i), "a\n\r\x00b", string(make([]byte, 16)), day.Add(time.Duration(i)*time.Second), day,
			"lc", []uint64{1, uint64(i)}, "b", &f, uint64(1)<<63, "\t", int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	var s, lc string
	var at time.Time
	var arr []uint64
	if err := conn.QueryRow(ctx, "SELECT count(), any(c2), max(c4), any(c6), max(c7) FROM wide").Scan(&n, &s, &at, &lc, &arr); err != nil {
		t.Fatal(err)
	}
	if n != 3 || s != "a\n\r\x00b" || !at.Equal(day.Add(2*time.Second)) || lc != "lc" || !slices.Equal(arr, []uint64{1, 2}) {
		t.Errorf("read back %d rows, %q, %v, %q, %v", n, s, at, lc, arr)
	}
}

// An external table is there for its query alone.
func TestExternalTable(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, "default", "")
	tab, err := ext.NewTable("_ids", ext.Column("id", "FixedString(16)"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"0123456789abcdef", "fedcba9876543210"} {
		if err := tab.Append([]byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	var n uint64
	q := "SELECT count() FROM _ids WHERE id IN (SELECT toFixedString('0123456789abcdef', 16))"
	if err := conn.QueryRow(ch.Context(ctx, ch.WithExternalTable(tab)), q).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows, %v; want 1", n, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM _ids").Scan(&n); err == nil {
		t.Errorf("_ids outlived its query")
	}
}

// A query's settings are its own: the next query has the defaults again,
// readonly too.
func TestSettingsPerQuery(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, "default", "")
	setting := func(ctx context.Context) string {
		var v string
		if err := conn.QueryRow(ctx, "SELECT toString(getSetting('max_threads'))").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	def := setting(ctx)
	if got := setting(ch.Context(ctx, ch.WithSettings(ch.Settings{"max_threads": 1}))); got != "1" {
		t.Errorf("max_threads=1: %s", got)
	}
	if got := setting(ctx); got != def {
		t.Errorf("after max_threads=1: %s, want %s", got, def)
	}
	ro := connect(t, "default", "?readonly=2")
	err := ro.Exec(ctx, "CREATE TABLE IF NOT EXISTS refused (x UInt8) ENGINE = Memory")
	var ex *ch.Exception
	if !errors.As(err, &ex) || ex.Code != 164 {
		t.Errorf("CREATE TABLE with readonly=2: %v, want code 164 (READONLY)", err)
	}
	mustExec(t, conn, "CREATE TABLE IF NOT EXISTS allowed (x UInt8) ENGINE = Memory")
}

// Errors carry their code, name and HTTP status as a server's do.
func TestErrors(t *testing.T) {
	conn := connect(t, "default", "")
	err := conn.Exec(context.Background(), "SELECT * FROM no_such_table")
	var ex *ch.Exception
	var he *ch.HTTPError
	if !errors.As(err, &ex) || ex.Code != 60 || ex.CodeName != "UNKNOWN_TABLE" || !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Errorf("unknown table: %v, want code 60 UNKNOWN_TABLE, HTTP 404", err)
	}
	_, err = connect(t, "no_such_database", "").ServerVersion()
	if err == nil {
		err = connect(t, "no_such_database", "").Exec(context.Background(), "SELECT 1")
	}
	if !errors.As(err, &ex) || ex.Code != 81 {
		t.Errorf("unknown database: %v, want code 81", err)
	}
}

// The DSN's database is the queries' current one.
func TestDatabase(t *testing.T) {
	mustExec(t, connect(t, "default", ""), "CREATE DATABASE IF NOT EXISTS other")
	var db string
	if err := connect(t, "other", "").QueryRow(context.Background(), "SELECT currentDatabase()").Scan(&db); err != nil || db != "other" {
		t.Errorf("current database %q, %v; want other", db, err)
	}
}

func mustExec(t *testing.T, conn driver.Conn, q string) {
	t.Helper()
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A SELECT's answer is streamed (no Content-Length: the server does not
// hold it whole) and complete: every row of a multi-block answer reads
// back, through clickhouse-go and as raw Native.
func TestStreamed(t *testing.T) {
	conn := connect(t, "default", "")
	const n = 1_000_000
	var count, sum, length uint64
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT number, toString(number) FROM numbers(%d)", n))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x uint64
		var s string
		if err := rows.Scan(&x, &s); err != nil {
			t.Fatal(err)
		}
		count, sum, length = count+1, sum+x, length+uint64(len(s))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// 10 numbers of 1 digit, 90 of 2, ... 900,000 of 6.
	if count != n || sum != n*(n-1)/2 || length != 10+90*2+900*3+9000*4+90000*5+900000*6 {
		t.Errorf("read %d rows, sum %d, %d digits", count, sum, length)
	}
	resp, err := http.Post(testURL+"/?default_format=Native", "text/plain", strings.NewReader(fmt.Sprintf("SELECT number FROM numbers(%d)", n)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.ContentLength != -1 {
		t.Fatalf("%s, Content-Length %d, %v", resp.Status, resp.ContentLength, err)
	}
	// Native at revision 0: blocks of (columns, rows, "number", "UInt64", rows × 8 bytes).
	got := 0
	for b := body; len(b) > 0; {
		cols, k := binary.Uvarint(b)
		rowsN, k2 := binary.Uvarint(b[k:])
		b = b[k+k2:]
		head := "\x06number\x06UInt64"
		if cols != 1 || !strings.HasPrefix(string(b), head) || len(b) < len(head)+8*int(rowsN) {
			t.Fatalf("a bad block after %d rows", got)
		}
		b = b[len(head)+8*int(rowsN):]
		got += int(rowsN)
	}
	if got != n {
		t.Errorf("%d rows in the raw answer, want %d", got, n)
	}
}

// A query that fails after the first blocks were sent: the error follows
// them, as ClickHouse frames it, and clickhouse-go reports it.
func TestErrorWhileAnswering(t *testing.T) {
	conn := connect(t, "default", "?max_block_size=1000")
	rows, err := conn.Query(context.Background(), "SELECT throwIf(number = 500000, 'boom at half a million') FROM numbers(1000000)")
	if err != nil {
		t.Fatalf("the query failed before answering: %v", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	err = rows.Err()
	var ex *ch.Exception
	if !errors.As(err, &ex) || ex.Code != 395 || !strings.Contains(ex.Message, "boom at half a million") || n == 0 || n > 500000 {
		t.Errorf("after %d rows: %v; want exception 395 with its message after some rows", n, err)
	}
}
