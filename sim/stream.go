package sim

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Format is an OTLP file format, as the collector's file exporter writes it.
type Format uint8

// Formats.
const (
	// JSONLines is one ExportTraceServiceRequest as OTLP JSON per line.
	JSONLines Format = iota
	// Proto is binary OTLP ExportTraceServiceRequest messages, each
	// preceded by its length as 4 bytes big-endian.
	Proto
)

var errStopped = errors.New("sim: writer stopped")

// Write simulates the scenario and writes its traces to w in format f, one
// message per trace, without retaining them. The bytes are the same as Run
// followed by Result.WriteJSONLines or Result.WriteProto; the conversion to
// pdata and the marshaling run on all CPUs while the (sequential) simulation
// goes on.
func Write(s Scenario, w io.Writer, f Format) (*Stats, error) {
	if f > Proto {
		return nil, errors.New("sim: unknown format")
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	type result struct {
		buf []byte
		err error
	}
	type job struct {
		b   *builder
		out chan result
	}
	jobs := make(chan job, 4*workers)
	order := make(chan chan result, 64*workers)
	done := make(chan struct{})
	writerDone := make(chan struct{})
	var werr error
	go func() {
		defer close(writerDone)
		bw := bufio.NewWriterSize(w, 1<<20)
		for c := range order {
			r := <-c
			if werr != nil {
				continue
			}
			if r.err == nil {
				_, r.err = bw.Write(r.buf)
			}
			if r.err != nil {
				werr = r.err
				close(done)
			}
		}
		if werr == nil {
			werr = bw.Flush()
		}
	}()
	var wg sync.WaitGroup
	st, err := simulate(s, func(g *gen) {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pb := newPdataBuilder(g.nodes)
				var jm ptrace.JSONMarshaler
				var pm ptrace.ProtoMarshaler
				for j := range jobs {
					td := pb.build(j.b)
					g.recycle(j.b)
					var r result
					if f == JSONLines {
						r.buf, r.err = jm.MarshalTraces(td)
						r.buf = append(r.buf, '\n')
					} else {
						var body []byte
						body, r.err = pm.MarshalTraces(td)
						r.buf = make([]byte, 4+len(body))
						binary.BigEndian.PutUint32(r.buf, uint32(len(body)))
						copy(r.buf[4:], body)
					}
					j.out <- r
				}
			}()
		}
		g.sink = func(_ Trace, b *builder) error {
			c := make(chan result, 1)
			select {
			case order <- c:
			case <-done:
				return errStopped
			}
			jobs <- job{b, c}
			return nil
		}
	})
	close(jobs)
	wg.Wait()
	close(order)
	<-writerDone
	if werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}
