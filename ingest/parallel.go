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

// decodeJob is one request of a file to decode.
type decodeJob struct {
	b     []byte
	lines bool // from a JSON lines file: already checked by the line scanner
	line  int  // lines: the line it starts on
	where string
}

// decode decodes the request j into d's span buffer: a JSON line, or a
// message of a length-prefixed stream (protobuf or JSON, either maybe one
// zstd frame: told from its bytes). json says, for an error, whether it
// was JSON.
func (d *Decoder) decode(j decodeJob) (spans []graph.Span, json bool, err error) {
	if j.lines {
		spans, err = d.decodeJSON(d.spans[:0], j.b)
		if err != nil {
			placeJSONError(err, j.b, j.line)
		}
		return spans, true, err
	}
	b := j.b
	if isZstd(b) {
		if b, err = d.unzstd(b); err != nil {
			return d.spans[:0], false, err
		}
	}
	json = isJSON(b)
	spans, err = d.AppendRequest(d.spans[:0], b, json)
	return spans, json, err
}

// maxPooledJob: request buffers larger than this are not kept for reuse.
const maxPooledJob = 4 << 20

func (fr *fileReader) startPool(workers int) {
	p := &decodePool{fr: fr, jobs: make(chan decodeJob, 2*workers), free: make(chan []byte, 4*workers)}
	for i := 0; i < workers; i++ {
		wd := &Decoder{}
		wd.init(fr.d.cfg)
		p.wg.Add(1)
		go p.work(wd)
	}
	fr.pool = p
}

func (p *decodePool) work(d *Decoder) {
	defer p.wg.Done()
	for j := range p.jobs {
		spans, json, err := d.decode(j)
		d.spans = spans[:0]
		if err != nil {
			p.fr.rejected(err, j.where, json) // locks for itself
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
		d.dropScratch()
	}
}

// submit queues j with a copy of its bytes for decoding. It returns the
// first error emit returned, so that the reader stops.
func (p *decodePool) submit(j decodeJob) error {
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
	j.b = append(buf, j.b...)
	p.jobs <- j
	return nil
}

// close waits for the queued requests and returns emit's first error.
func (p *decodePool) close() error {
	close(p.jobs)
	p.wg.Wait()
	return p.err
}

// decodeRequest decodes one request of the file and emits its spans, on
// the pool when there is one; j.where locates it for errors (":12" or
// ": message 3").
func (fr *fileReader) decodeRequest(j decodeJob) error {
	if fr.pool != nil {
		return fr.pool.submit(j)
	}
	spans, json, err := fr.d.decode(j)
	if err != nil {
		fr.rejected(err, j.where, json)
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
