package main

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// engine is chdb, ClickHouse's engine as a library (libchdb.so, from npm's
// @chdb/lib-linux-x64-gnu), loaded at run time without cgo (purego) and
// called through its C API (chdb.h). A process has one connection, one
// data path: engine serialises every call to it (mu).
type engine struct {
	mu   sync.Mutex
	conn unsafe.Pointer // chdb_connection

	// handle is the chdb_connection * chdb_connect returned.
	handle *unsafe.Pointer

	// The C API, chdb.h.
	connect       func(argc int32, argv **byte) *unsafe.Pointer                                          // chdb_connect
	closeConn     func(conn *unsafe.Pointer)                                                             // chdb_close_conn
	queryN        func(conn unsafe.Pointer, q *byte, qlen uintptr, f *byte, flen uintptr) unsafe.Pointer // chdb_query_n
	resultBuffer  func(r unsafe.Pointer) *byte                                                           // chdb_result_buffer
	resultLength  func(r unsafe.Pointer) uintptr                                                         // chdb_result_length
	resultError   func(r unsafe.Pointer) *byte                                                           // chdb_result_error
	destroyResult func(r unsafe.Pointer)                                                                 // chdb_destroy_query_result
	// Streaming: chdb_stream_query_n starts a query, chdb_stream_fetch_result returns its output's next
	// piece (empty at the end), chdb_stream_cancel_query stops it.
	streamQueryN func(conn unsafe.Pointer, q *byte, qlen uintptr, f *byte, flen uintptr) unsafe.Pointer
	streamFetch  func(conn unsafe.Pointer, r unsafe.Pointer) unsafe.Pointer
	streamCancel func(conn unsafe.Pointer, r unsafe.Pointer)
	// The result's figures: chdb_result_storage_rows_read, …_storage_bytes_read, …_rows_read (the
	// result's rows), …_rows_written, …_bytes_written.
	storageRowsRead, storageBytesRead, resultRows, rowsWritten, bytesWritten func(r unsafe.Pointer) uint64
}

// openEngine loads lib and connects to the data at path (a directory,
// created when missing).
func openEngine(lib, path string) (*engine, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", lib, err)
	}
	e := &engine{}
	for name, fn := range map[string]any{
		"chdb_connect":                   &e.connect,
		"chdb_close_conn":                &e.closeConn,
		"chdb_query_n":                   &e.queryN,
		"chdb_result_buffer":             &e.resultBuffer,
		"chdb_result_length":             &e.resultLength,
		"chdb_result_error":              &e.resultError,
		"chdb_destroy_query_result":      &e.destroyResult,
		"chdb_stream_query_n":            &e.streamQueryN,
		"chdb_stream_fetch_result":       &e.streamFetch,
		"chdb_stream_cancel_query":       &e.streamCancel,
		"chdb_result_storage_rows_read":  &e.storageRowsRead,
		"chdb_result_storage_bytes_read": &e.storageBytesRead,
		"chdb_result_rows_read":          &e.resultRows,
		"chdb_result_rows_written":       &e.rowsWritten,
		"chdb_result_bytes_written":      &e.bytesWritten,
	} {
		sym, err := purego.Dlsym(h, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		purego.RegisterFunc(fn, sym)
	}
	args := []string{"chdbhttp", "--path=" + path}
	argv := make([]*byte, len(args)+1)
	keep := make([][]byte, len(args))
	for i, a := range args {
		keep[i] = append([]byte(a), 0)
		argv[i] = &keep[i][0]
	}
	e.handle = e.connect(int32(len(args)), &argv[0])
	runtime.KeepAlive(keep)
	if e.handle == nil || *e.handle == nil {
		return nil, fmt.Errorf("chdb_connect --path=%s failed", path)
	}
	e.conn = *e.handle
	return e, nil
}

// close closes the connection.
func (e *engine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handle != nil {
		e.closeConn(e.handle)
		e.handle, e.conn = nil, nil
	}
}

// errEngine is an error the engine reported: its message, as ClickHouse
// words it ("Code: 60. DB::Exception: ...").
type errEngine struct{ msg string }

func (e *errEngine) Error() string { return e.msg }

// stats are a query's figures, as X-ClickHouse-Summary gives them.
type stats struct {
	readRows, readBytes, writtenRows, writtenBytes, resultRows uint64
}

// add adds o's figures to s's.
func (s *stats) add(o stats) {
	s.readRows += o.readRows
	s.readBytes += o.readBytes
	s.writtenRows += o.writtenRows
	s.writtenBytes += o.writtenBytes
	s.resultRows += o.resultRows
}

// query runs one statement, which may carry data after it, and returns
// its output in format and its figures. The caller holds mu.
func (e *engine) query(q []byte, format string) ([]byte, stats, error) {
	if e.conn == nil {
		return nil, stats{}, errors.New("chdb: closed")
	}
	if len(q) == 0 {
		return nil, stats{}, &errEngine{"Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)"}
	}
	f := []byte(format + "\x00")
	r := e.queryN(e.conn, &q[0], uintptr(len(q)), &f[0], uintptr(len(format)))
	runtime.KeepAlive(q)
	runtime.KeepAlive(f)
	if r == nil {
		return nil, stats{}, errors.New("chdb: no result")
	}
	defer e.destroyResult(r)
	if err := e.errorOf(r); err != nil {
		return nil, stats{}, err
	}
	st := stats{readRows: e.storageRowsRead(r), readBytes: e.storageBytesRead(r), writtenRows: e.rowsWritten(r),
		writtenBytes: e.bytesWritten(r), resultRows: e.resultRows(r)}
	n := e.resultLength(r)
	if n == 0 {
		return nil, st, nil
	}
	return append([]byte(nil), unsafe.Slice(e.resultBuffer(r), n)...), st, nil
}

// stream runs one statement and hands its output to chunk a piece at a
// time, as the engine produces it (each piece is valid during the call):
// the engine answers the next piece while the caller sends this one, and
// a result is never whole in memory. An error of chunk cancels the query
// and is returned. The caller holds mu.
func (e *engine) stream(q []byte, format string, chunk func([]byte) error) error {
	if e.conn == nil {
		return errors.New("chdb: closed")
	}
	if len(q) == 0 {
		return &errEngine{"Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)"}
	}
	f := []byte(format + "\x00")
	h := e.streamQueryN(e.conn, &q[0], uintptr(len(q)), &f[0], uintptr(len(format)))
	runtime.KeepAlive(q)
	runtime.KeepAlive(f)
	if h == nil {
		return errors.New("chdb: no result")
	}
	defer e.destroyResult(h)
	if err := e.errorOf(h); err != nil {
		return err
	}
	for {
		r := e.streamFetch(e.conn, h)
		if r == nil {
			e.streamCancel(e.conn, h)
			return errors.New("chdb: no result")
		}
		if err := e.errorOf(r); err != nil {
			e.destroyResult(r)
			return err
		}
		n := e.resultLength(r)
		if n == 0 {
			e.destroyResult(r)
			return nil
		}
		err := chunk(unsafe.Slice(e.resultBuffer(r), n))
		e.destroyResult(r)
		if err != nil {
			e.streamCancel(e.conn, h)
			return err
		}
	}
}

// errorOf is the error result r holds, if any.
func (e *engine) errorOf(r unsafe.Pointer) error {
	if p := e.resultError(r); p != nil {
		if msg := cString(p); msg != "" {
			return &errEngine{strings.TrimSpace(msg)}
		}
	}
	return nil
}

// cString copies the NUL-terminated string at p.
func cString(p *byte) string {
	var b []byte
	for ; *p != 0; p = (*byte)(unsafe.Add(unsafe.Pointer(p), 1)) {
		b = append(b, *p)
	}
	return string(b)
}
