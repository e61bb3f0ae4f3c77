package otlp

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// errTooLarge reports a body over MaxBodyBytes, as sent or decompressed.
var errTooLarge = errors.New("request body too large")

// errSlowBody reports a body that did not arrive at MinBodyRate, or within
// BodyTimeout.
var errSlowBody = errors.New("request body too slow")

// errNoBudget reports a body that would take the bodies being received past
// BodyBufferBytes.
var errNoBudget = errors.New("too many request bodies being received")

// bodyError is a body that could not be read or decompressed: the client's
// fault (400), unlike errTooLarge (413).
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// readChunk is the least a body's buffer and budget grow by.
const readChunk = 32 << 10

// bodyBudget bounds the bytes of HTTP bodies received and not yet answered,
// across requests (Config.BodyBufferBytes). Bodies are read before their
// request takes an admission slot, so that a client that sends slowly holds
// no slot; this bound keeps what they hold in memory in check instead.
type bodyBudget struct {
	used atomic.Int64
	max  int64
}

// reserve takes n bytes of the budget, or reports that it cannot.
func (b *bodyBudget) reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *bodyBudget) release(n int64) { b.used.Add(-n) }

// readRaw reads the request body as sent into w.raw and returns it. It is
// called before the request takes an admission slot, and bounds what a
// client that sends slowly, or not at all, can hold:
//
//   - bytes: at most MaxBodyBytes (then errTooLarge); the buffer and the
//     request's share of the body budget grow with what has arrived (by at
//     least readChunk, at most doubling), never with what Content-Length
//     announces, and a budget that cannot grow answers errNoBudget;
//   - time: at least MinBodyRate bytes a second, measured over windows of
//     BodyRateWindow, and all of it within BodyTimeout (else errSlowBody),
//     enforced with the connection's read deadline.
//
// Other read errors are bodyErrors.
func (s *Server) readRaw(w *work, rw http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	// MaxBytesReader also tells the server to close the connection rather
	// than read the rest of an oversized body.
	src := http.MaxBytesReader(rw, r.Body, limit)
	p := &w.pace
	s.startPace(p, rw)
	defer p.stop()

	buf := w.raw[:0]
	defer func() { w.raw = buf }()
	for {
		if int64(len(buf)) == w.reserved {
			// Grow by what arrived so far (a client that sent much is
			// sending), by readChunk at least, to one byte past the
			// announced length or the limit: that byte tells EOF, or a
			// body over the limit, from a full buffer.
			end := limit + 1
			if r.ContentLength >= 0 {
				end = min(end, r.ContentLength+1)
			}
			grow := min(max(int64(len(buf)), readChunk), end-int64(len(buf)))
			if grow <= 0 { // more than announced: read on, a byte at a time, to see
				grow = 1
			}
			if !s.budget.reserve(grow) {
				return nil, errNoBudget
			}
			w.reserved += grow
			if int64(cap(buf)) < w.reserved {
				buf = slices.Grow(buf, int(w.reserved)-len(buf))
			}
		}
		n, err := src.Read(buf[len(buf):w.reserved])
		buf = buf[:len(buf)+n]
		p.progress(n)
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, readErr(err)
		}
	}
}

// readErr classifies an error reading a body as sent.
func readErr(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errSlowBody
	}
	return &bodyError{fmt.Errorf("read body: %w", err)}
}

// pace enforces a body's minimum rate and time limit with the connection's
// read deadline: the deadline is the end of the current rate window, moved
// on each time the window's bytes arrive, and never past the time limit.
type pace struct {
	rc       *http.ResponseController
	window   time.Duration
	perWin   int64     // bytes due in each window
	end      time.Time // BodyTimeout after the start
	winEnd   time.Time // the current window's end
	got      int64     // bytes received in the current window
	disabled bool      // the connection has no read deadline (a handler mounted elsewhere)
}

// startPace starts p on the body of the request rw answers.
func (s *Server) startPace(p *pace, rw http.ResponseWriter) {
	now := time.Now()
	*p = pace{
		rc:     http.NewResponseController(rw),
		window: s.cfg.BodyRateWindow,
		perWin: int64(float64(s.cfg.MinBodyRate) * s.cfg.BodyRateWindow.Seconds()),
		end:    now.Add(s.cfg.BodyTimeout),
	}
	p.winEnd = now.Add(p.window)
	if s.cfg.MinBodyRate < 0 { // no rate check: only the time limit
		p.winEnd, p.perWin = p.end, math.MaxInt64
	}
	p.arm()
}

// arm sets the read deadline to the end of the current window, or the
// time limit if sooner.
func (p *pace) arm() {
	if p.disabled {
		return
	}
	d := p.winEnd
	if p.end.Before(d) {
		d = p.end
	}
	if err := p.rc.SetReadDeadline(d); err != nil {
		p.disabled = true // ErrNotSupported: the server's own timeouts apply
	}
}

// progress counts n bytes received; once the window's share has arrived
// the next window starts now.
func (p *pace) progress(n int) {
	p.got += int64(n)
	if p.got >= p.perWin && !p.disabled {
		p.got = 0
		p.winEnd = time.Now().Add(p.window)
		p.arm()
	}
}

// stop clears the read deadline: the connection may carry another request.
func (p *pace) stop() {
	if !p.disabled {
		_ = p.rc.SetReadDeadline(time.Time{})
	}
	p.rc = nil
}

// decompress returns raw decompressed by c into w.body, or raw itself for
// identity. It stops past limit bytes with errTooLarge, so that a
// decompression bomb costs limit bytes of memory and the time to inflate
// them, no more.
func (w *work) decompress(c coding, raw []byte, limit int64) ([]byte, error) {
	switch {
	case c == codingIdentity:
		return raw, nil
	case c == codingSnappy && !isSnappyFramed(raw):
		out, err := decompressSnappyBlock(w.body[:0], raw, limit)
		if err != nil {
			return nil, err
		}
		w.body = out
		return out, nil
	}
	defer w.unz.release()
	src, err := w.unz.reader(c, raw)
	if err != nil {
		return nil, err
	}
	buf := w.body[:0]
	defer func() { w.body = buf }()
	for {
		if len(buf) == cap(buf) {
			// Never beyond limit+1: the byte past the limit is enough to
			// tell that the body is too large.
			grow := min(max(cap(buf), readChunk), int(limit+1)-len(buf))
			buf = slices.Grow(buf, grow)
		}
		n, err := src.Read(buf[len(buf):min(cap(buf), int(limit+1))])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, codingErr(c, err)
		}
	}
}
