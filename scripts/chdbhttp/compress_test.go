package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ClickHouse/ch-go/compress"
)

// clickhouse-go's lz4 and zstd compressions (the collector's clickhouse
// exporter's default is lz4, with async_insert): an insert's compressed
// block and a result of several compressed blocks (more than a block's
// 1 MiB) come back as they were made.
func TestNativeCompression(t *testing.T) {
	for _, params := range []string{"?compress=lz4", "?compress=zstd", "?compress=lz4&async_insert=true"} {
		t.Run(params, func(t *testing.T) {
			ctx := context.Background()
			conn := connect(t, "default", params)
			table := "compressed_" + strings.NewReplacer("?", "", "=", "_", "&", "_").Replace(params)
			mustExec(t, conn, "DROP TABLE IF EXISTS "+table)
			mustExec(t, conn, "CREATE TABLE "+table+" (n UInt64, s String) ENGINE = MergeTree ORDER BY n")
			const rows = 60000
			value := func(i int) string { return fmt.Sprintf("row %d: %s", i, strings.Repeat(string(rune('a'+i%26)), i%40)) }
			b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (n, s)")
			if err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				if err := b.Append(uint64(i), value(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
			r, err := conn.Query(ctx, "SELECT n, s FROM "+table+" ORDER BY n")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := 0
			for r.Next() {
				var n uint64
				var s string
				if err := r.Scan(&n, &s); err != nil {
					t.Fatal(err)
				}
				if n != uint64(got) || s != value(got) {
					t.Fatalf("row %d: %d %q, want %d %q", got, n, s, got, value(got))
				}
				got++
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if got != rows {
				t.Errorf("%d rows back, %d inserted", got, rows)
			}
		})
	}
}

// compress=1 answers in blocks of network_compression_method (LZ4 by
// default) holding what compress=0 answers; decompress=1 reads a body of
// several blocks; a corrupted or cut block, an unknown method and a
// compress that is no boolean are refused with ClickHouse's codes.
func TestNativeCompressionHTTP(t *testing.T) {
	if testURL == "" {
		t.Skip("set CHDB_LIB to libchdb.so")
	}
	const query = "SELECT number, repeat('x', number % 100) FROM numbers(30000) FORMAT TSV"
	plain, code := post(t, url.Values{}, []byte(query))
	if code != "" || len(plain) < 1<<20 {
		t.Fatalf("uncompressed: %d bytes, exception %q; want more than a block (1 MiB)", len(plain), code)
	}
	for _, c := range []struct {
		method string
		byte   byte
	}{{"", 0x82}, {"LZ4", 0x82}, {"zstd", 0x90}, {"NONE", 0x02}} {
		body, code := post(t, url.Values{"compress": {"1"}, "network_compression_method": {c.method}}, []byte(query))
		if code != "" || len(body) < blockHeader || body[blockChecksum] != c.byte {
			t.Errorf("method %q: %d bytes, exception %q; want blocks of method 0x%02x", c.method, len(body), code, c.byte)
			continue
		}
		got, err := io.ReadAll(io.LimitReader(compress.NewReader(bytes.NewReader(body)), int64(len(plain))))
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("method %q: decompressed %d bytes (%v), want the %d of compress=0", c.method, len(got), err, len(plain))
		}
	}

	var blocks []byte
	for _, part := range []string{"1\ta\n2\tb\n", "3\tc\n"} {
		w := compress.NewWriter(compress.LevelZero, compress.LZ4)
		if err := w.Compress([]byte(part)); err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, w.Data...)
	}
	post(t, url.Values{}, []byte("CREATE OR REPLACE TABLE decompressed (n UInt8, s String) ENGINE = Memory"))
	insert := url.Values{"query": {"INSERT INTO decompressed FORMAT TSV"}, "decompress": {"1"}}
	if _, code := post(t, insert, blocks); code != "" {
		t.Fatalf("insert of two blocks: exception %q", code)
	}
	if got, _ := post(t, url.Values{}, []byte("SELECT groupArray(s) FROM (SELECT s FROM decompressed ORDER BY n)")); string(got) != "['a','b','c']\n" {
		t.Errorf("inserted %q, want ['a','b','c']", got)
	}

	corrupt := bytes.Clone(blocks)
	corrupt[blockHeader] ^= 0xff
	for _, c := range []struct {
		what   string
		params url.Values
		body   []byte
		code   string
	}{
		{"a corrupted block", insert, corrupt, "271"},
		{"a cut block", insert, blocks[:len(blocks)-1], "271"},
		{"a cut header", insert, blocks[:blockHeader-1], "271"},
		{"an unknown method", url.Values{"compress": {"1"}, "network_compression_method": {"brotli"}}, []byte("SELECT 1"), "432"},
		{"compress=maybe", url.Values{"compress": {"maybe"}}, []byte("SELECT 1"), "36"},
	} {
		if _, code := post(t, c.params, c.body); code != c.code {
			t.Errorf("%s: exception %q, want %s", c.what, code, c.code)
		}
	}
	if got, _ := post(t, url.Values{}, []byte("SELECT count() FROM decompressed")); string(got) != "3\n" {
		t.Errorf("%s rows after the refused inserts, want 3", got)
	}
}

// post sends body to the server with params and returns the response's
// body and X-ClickHouse-Exception-Code ("" for none).
func post(t *testing.T, params url.Values, body []byte) ([]byte, string) {
	t.Helper()
	resp, err := http.Post(testURL+"/?"+params.Encode(), "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, resp.Header.Get("X-ClickHouse-Exception-Code")
}
