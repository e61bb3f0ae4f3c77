package web_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/store"
)

// loadedStore returns an embedded store holding traces.
func loadedStore(t *testing.T, traces [][]graph.Span) store.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fixture.Load(t, st, traces)
	return st
}

// tailSampled keeps, of the rollout, every trace with a failed span and
// the others whose id the collector's tail_sampling probabilistic policy
// keeps at 5 % — recording no probability, as that processor does.
func tailSampled(t *testing.T) [][]graph.Span {
	plain, _ := rollout()
	var out [][]graph.Span
	for _, tr := range plain {
		failed := false
		for i := range tr {
			failed = failed || tr[i].Failed
		}
		if failed || analysis.TailHash(tr[0].TraceID) <= 0.05 {
			out = append(out, tr)
		}
	}
	if len(out) == len(plain) {
		t.Fatal("tail sampling kept every trace")
	}
	return out
}

// The UI marks estimated figures (docs/SPEC.md §4.9): on sampled traffic
// the fleet says what was received and what it stands for, counts carry
// ≈, the APIs' table has the traces received and the failed share with
// its interval; the API page the same on its cards. Tail sampling that
// recorded no probability shows its warning. Traffic received whole
// shows none of it.
func TestBrowserSampledTraffic(t *testing.T) {
	b := newUIBrowser(t)
	traces, received, estimated := sampledRollout(t)
	cases := []struct {
		name    string
		st      store.Store
		sampled bool
		warning string
	}{
		{"sampled", loadedStore(t, traces), true, ""},
		{"tail sampled, nothing recorded", loadedStore(t, tailSampled(t)), false, "tail sampling"},
		{"whole", uiStore(t), false, ""},
	}
	for _, c := range cases {
		srv := serve(t, c.st, uiConfig())
		b.open(srv.URL, "/", nil)
		b.waitPage("fleet")
		notice := uiEval[map[string]string](b, `(() => { const n = document.getElementById('fleet-sampled'); return n ? {...n.dataset, text: n.textContent} : {}; })()`)
		heads := uiEval[string](b, `[...document.querySelectorAll('#apis thead th')].map((th) => th.textContent).join('|')`)
		marked := uiEval[int](b, `document.querySelectorAll('#apis tbody .est').length`)
		warning := uiEval[string](b, `[...document.querySelectorAll('[data-warning="fleet"]')].map((n) => n.textContent).join(' ')`)
		if c.sampled {
			if notice["received"] != itoa(received) || notice["estimated"] != itoa(estimated) {
				t.Errorf("%s: notice %v, want %d received for %d", c.name, notice, received, estimated)
			}
			if !strings.Contains(heads, "Received") || !strings.Contains(heads, "Failed % (95% CI)") || marked == 0 {
				t.Errorf("%s: table heads %q, %d marked estimates", c.name, heads, marked)
			}
		} else if len(notice) != 0 || strings.Contains(heads, "Received") || marked != 0 {
			t.Errorf("%s: unsampled traffic shown as sampled: %v %q %d", c.name, notice, heads, marked)
		}
		if c.warning == "" && warning != "" || !strings.Contains(warning, c.warning) {
			t.Errorf("%s: warning %q, want one with %q", c.name, warning, c.warning)
		}
		b.safe("the fleet page, " + c.name)

		if !c.sampled {
			continue
		}
		b.open(srv.URL, "/api", url.Values{"name": {fixture.API}})
		b.waitPage("api")
		cards := uiEval[map[string]uiCell](b, `(`+uiCellsJS+`)(document.getElementById('api-cards'))`)
		tr := cards["traces"]
		if tr.Value == nil || *tr.Value != itoa(estimated) || !strings.HasPrefix(strings.TrimSpace(tr.Text), "≈") {
			t.Errorf("API traces card %+v, want ≈%d", tr, estimated)
		}
		if n := uiEval[string](b, `document.getElementById('api-sampled') ? document.getElementById('api-sampled').dataset.received : ''`); n != itoa(received) {
			t.Errorf("API notice: %q received, want %d", n, received)
		}
		b.safe("the API page, sampled")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Traces split across partitions (docs/SPEC.md §6.4) show on the fleet
// page as a warning with their count and the collector setting that fixes
// it; a store without any shows none.
func TestBrowserSplitTraces(t *testing.T) {
	b := newUIBrowser(t)
	split := loadedStore(t, tailSampled(t))
	var recs []store.Change
	for i := range 3 {
		start := fixture.End.Add(-time.Duration(10+i) * time.Minute).UnixNano()
		r := &analysis.TraceResult{TraceID: graph.TraceID{0x5b, byte(i + 1)}, Start: start, Window: analysis.WindowOf(start, fixture.Window), Split: true}
		recs = append(recs, store.Change{New: &store.Record{TraceID: r.TraceID, Start: r.Start, Window: r.Window, Result: r, Facts: []byte{}}})
	}
	if err := split.Apply(context.Background(), store.Batch{Changes: recs}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		st   store.Store
		want string
	}{{"split", split, "3"}, {"whole", uiStore(t), ""}} {
		srv := serve(t, c.st, uiConfig())
		b.open(srv.URL, "/", nil)
		b.waitPage("fleet")
		got := uiEval[map[string]string](b, `(() => { const n = document.getElementById('fleet-split'); return n ? {...n.dataset, text: n.textContent} : {}; })()`)
		if got["split"] != c.want || c.want != "" && (!strings.Contains(got["text"], "3 traces were split across partitions") ||
			!strings.Contains(got["text"], "partition_traces_by_id: true")) {
			t.Errorf("%s: split notice %v, want %q traces", c.name, got, c.want)
		}
		b.safe("the fleet page, " + c.name)
	}
}
