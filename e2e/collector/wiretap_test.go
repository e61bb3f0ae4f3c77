package collector

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// wiretap is a TCP relay between the collector and stormradius that
// passes every byte through unchanged and reads, on the side, the
// compression each request declares: Content-Encoding of HTTP/1.1
// requests, grpc-encoding of HTTP/2 (gRPC) ones. It shows that the
// exporter really compressed as configured, so that a compression the
// config failed to apply cannot pass as tested.
type wiretap struct {
	addr string
	h2   bool
	// inspect, when set, is given each HTTP/1.1 request, its body unread
	// (what it leaves is discarded).
	inspect func(*http.Request)
	mu      sync.Mutex
	seen    map[string]int // requests per declared encoding ("" for none)
	fault   error
}

// startWiretap relays a new loopback port to target; h2 reads HTTP/2
// (prior knowledge, as gRPC without TLS speaks it), else HTTP/1.1.
func startWiretap(t *testing.T, target string, h2 bool) *wiretap {
	t.Helper()
	return startTap(t, target, h2, nil)
}

// startTap is startWiretap with inspect given each HTTP/1.1 request.
func startTap(t *testing.T, target string, h2 bool, inspect func(*http.Request)) *wiretap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wiretap{addr: l.Addr().String(), h2: h2, inspect: inspect, seen: map[string]int{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	go func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			pr, pw := io.Pipe()
			wg.Add(3)
			go func() { defer wg.Done(); io.Copy(client, server); client.Close() }()
			go func() {
				defer wg.Done()
				io.Copy(server, io.TeeReader(client, pw))
				pw.Close()
				server.Close()
			}()
			go func() { defer wg.Done(); w.read(pr); io.Copy(io.Discard, pr) }()
		}
	}()
	return w
}

// read parses the client's side of one connection.
func (w *wiretap) read(r io.Reader) {
	br := bufio.NewReader(r)
	if !w.h2 {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				w.fail(err)
				return
			}
			w.saw(req.Header.Get("Content-Encoding"))
			if w.inspect != nil {
				w.inspect(req)
			}
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		w.fail(fmt.Errorf("no HTTP/2 preface: %q %v", preface, err))
		return
	}
	fr := http2.NewFramer(io.Discard, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	fr.SetMaxReadFrameSize(1<<24 - 1) // whatever the server allowed
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			w.fail(err)
			return
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			enc := ""
			for _, hf := range mh.Fields {
				if hf.Name == "grpc-encoding" && hf.Value != "identity" {
					enc = hf.Value
				}
			}
			w.saw(enc)
		}
	}
}

func (w *wiretap) saw(enc string) {
	w.mu.Lock()
	w.seen[enc]++
	w.mu.Unlock()
}

// fail keeps the first parse error that is not the connection's end.
func (w *wiretap) fail(err error) {
	if err == io.EOF || err == io.ErrUnexpectedEOF || strings.Contains(err.Error(), "closed") {
		return
	}
	w.mu.Lock()
	if w.fault == nil {
		w.fault = err
	}
	w.mu.Unlock()
}

// check asserts that every request declared encoding comp ("none": no
// encoding).
func (w *wiretap) check(t *testing.T, comp string) {
	t.Helper()
	want := comp
	if comp == "none" {
		want = ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fault != nil {
		t.Errorf("wiretap: %v", w.fault)
	}
	var got []string
	for enc, n := range w.seen {
		got = append(got, fmt.Sprintf("%q×%d", enc, n))
	}
	sort.Strings(got)
	if len(w.seen) != 1 || w.seen[want] == 0 {
		t.Errorf("requests through the wiretap declared encodings %v, want %q only", got, want)
	}
}
