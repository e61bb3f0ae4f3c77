package ingest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// Decoding on several goroutines emits the same requests (in some order),
// reports the same bad ones and counts the same as decoding on one: JSON
// lines with bad lines, a pretty-printed document, gzip, framed protobuf,
// zstd (the whole file, or each message).
func TestParallelDecodeSameAsSequential(t *testing.T) {
	var lines strings.Builder
	var msgs [][]byte
	for i := 0; i < 40; i++ {
		td := request(t, fmt.Sprintf("svc%02d", i), 1+i%5)
		lines.Write(jsonOf(t, td))
		lines.WriteByte('\n')
		if i%7 == 3 {
			lines.WriteString("{\"resourceSpans\": [nope\n")
		}
		msgs = append(msgs, protoOf(t, td))
	}
	msgs = append(msgs[:10], append([][]byte{[]byte("\x0a\xff\xff garbage")}, msgs[10:]...)...)
	inputs := map[string][]byte{
		"lines.jsonl":     []byte(lines.String()),
		"lines.jsonl.gz":  gz(t, []byte(lines.String())),
		"framed.pb":       frame(msgs...),
		"lines.jsonl.zst": zstdStream(t, []byte(lines.String())),
		"framed-zstd.bin": zstdMessages(t, msgs...),
	}
	for name, data := range inputs {
		seq := readAll(t, NewDecoder(DecoderConfig{}), name, data)
		d := NewDecoder(DecoderConfig{})
		d.Workers = 3
		par := readAll(t, d, name, data)
		if seq.err != nil || par.err != nil {
			t.Fatalf("%s: errors %v / %v", name, seq.err, par.err)
		}
		if seq.stats != par.stats {
			t.Errorf("%s: stats %+v, sequential %+v", name, par.stats, seq.stats)
		}
		if seq.stats.BadRequests == 0 || seq.stats.Requests != 40 {
			t.Errorf("%s: the input is not what the test means: %+v", name, seq.stats)
		}
		key := func(r readResult) []string {
			var out []string
			for _, names := range r.requests {
				out = append(out, strings.Join(names, ","))
			}
			slices.Sort(out)
			return out
		}
		if !slices.Equal(key(seq), key(par)) {
			t.Errorf("%s: parallel emitted other requests", name)
		}
		msgsOf := func(errs []error) []string {
			var out []string
			for _, e := range errs {
				out = append(out, e.Error())
			}
			slices.Sort(out)
			return out
		}
		if !slices.Equal(msgsOf(seq.bad), msgsOf(par.bad)) {
			t.Errorf("%s: bad requests differ:\n%v\n%v", name, msgsOf(par.bad), msgsOf(seq.bad))
		}
	}
}

// An error from emit stops a parallel read and is returned.
func TestParallelDecodeStopsOnEmitError(t *testing.T) {
	var lines strings.Builder
	for i := 0; i < 200; i++ {
		lines.Write(jsonOf(t, request(t, "s", 2)))
		lines.WriteByte('\n')
	}
	d := NewDecoder(DecoderConfig{})
	d.Workers = 2
	stop := errors.New("stop")
	calls := 0
	_, err := d.ReadFile(strings.NewReader(lines.String()), "f", func([]graph.Span) error {
		calls++
		if calls == 5 {
			return stop
		}
		return nil
	}, nil)
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the emit error", err)
	}
	if calls >= 200 {
		t.Fatalf("reading went on after the error: %d calls", calls)
	}
}
