package ingest

import (
	"fmt"
	"sync"

	"github.com/stormradius/stormradius/graph"
)

// decodePool decodes the requests of one ReadFile on several goroutines:
// the reader splits the file into requests (lines, documents, messages)
// and copies each into a job; every worker has its own Decoder; emit,
// onBad and the file's counts are called and updated under one lock, one
// request at a time. The order requests are emitted in is then not the
// file's: the analysis does not depend on it.
type decodePool struct {
	fr   *fileReader
	jobs chan decodeJob
	free chan []byte
	wg   sync.WaitGroup

	mu  sync.Mutex // serialises emit, onBad and FileStats
	err error      // the first error emit returned: reading stops
}

type decodeJob struct {
	b     []byte
	json  bool
	lines bool // from a JSON lines file: already checked by the line scanner
	where string
}

// maxPooledJob: request buffers larger than this are not kept for reuse.
const maxPooledJob = 4 << 20

func (fr *fileReader) startPool(workers int) {
	p := &decodePool{fr: fr, jobs: make(chan decodeJob, 2*workers), free: make(chan []byte, 4*workers)}
	for i := 0; i < workers; i++ {
		wd := &Decoder{}
		wd.init(DecoderConfig{ClaimHeader: fr.d.claimHeader})
		p.wg.Add(1)
		go p.work(wd)
	}
	fr.pool = p
}

func (p *decodePool) work(d *Decoder) {
	defer p.wg.Done()
	for j := range p.jobs {
		var (
			spans []graph.Span
			err   error
		)
		if j.lines {
			spans, err = d.decodeJSON(d.spans[:0], j.b)
		} else {
			spans, err = d.AppendRequest(d.spans[:0], j.b, j.json)
		}
		d.spans = spans[:0]
		if err != nil {
			p.fr.rejected(err, j.where, j.json) // locks for itself
		} else {
			p.mu.Lock()
			if p.err == nil {
				p.err = p.fr.emitLocked(spans)
			}
			p.mu.Unlock()
		}
		if cap(j.b) <= maxPooledJob {
			select {
			case p.free <- j.b[:0]:
			default:
			}
		}
		if cap(d.spans) > keepScratch/64 {
			d.spans = nil
		}
	}
}

// submit queues a copy of b for decoding. It returns the first error emit
// returned, so that the reader stops.
func (p *decodePool) submit(b []byte, json, lines bool, where string) error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return err
	}
	var buf []byte
	select {
	case buf = <-p.free:
	default:
	}
	p.jobs <- decodeJob{b: append(buf, b...), json: json, lines: lines, where: where}
	return nil
}

// close waits for the queued requests and returns emit's first error.
func (p *decodePool) close() error {
	close(p.jobs)
	p.wg.Wait()
	return p.err
}

// decodeRequest decodes one request of the file and emits its spans, on
// the pool when there is one; where locates it for errors (":12" or
// ": message 3"). lines marks a JSON request the line scanner checked.
func (fr *fileReader) decodeRequest(b []byte, json, lines bool, where string) error {
	if fr.pool != nil {
		return fr.pool.submit(b, json, lines, where)
	}
	d := fr.d
	var (
		spans []graph.Span
		err   error
	)
	if lines {
		spans, err = d.decodeJSON(d.spans[:0], b)
	} else {
		spans, err = d.AppendRequest(d.spans[:0], b, json)
	}
	if err != nil {
		fr.rejected(err, where, json)
		return nil
	}
	return fr.emitSpans(spans)
}

// emitLocked counts and emits spans decoded by a worker.
func (fr *fileReader) emitLocked(spans []graph.Span) error {
	fr.st.Requests++
	fr.st.Spans += len(spans)
	if fr.emit != nil {
		if err := fr.emit(spans); err != nil {
			return fmt.Errorf("%s: %w", fr.name, err)
		}
	}
	return nil
}
