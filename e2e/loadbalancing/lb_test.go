package loadbalancing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stormradius/stormradius/e2e/e2ekit"
)

// instances is how many stormradius instances the collector balances over.
const instances = 3

// Phase 1: the collector's load_balancing exporter (the shipped
// deploy/collector/loadbalancing.yaml, routing_key traceID, static
// resolver) in front of three `stormradius serve`, each on an embedded
// store of its own. Every trace must be on exactly one instance, whole,
// and the instances' traces together must be the sample's.
//
// The negative control routes by service instead (a config that splits
// traces): the same checks must then find problems, so that a check that
// cannot fail does not pass unseen.
func TestServe(t *testing.T) {
	t.Parallel()
	setup(t)
	for _, c := range []struct {
		name, override string
		wantProblems   bool
	}{
		{"traceID", "", false},
		{"negative-control/routing_key=service", "exporters:\n  load_balancing/stormradius:\n    routing_key: service\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			svcs := make([]*service, instances)
			for i := range svcs {
				data := []string{"--data", filepath.Join(t.TempDir(), "data")}
				svcs[i] = startService(t, fmt.Sprintf("serve #%d", i), suite.stormradius, data, "serve")
			}
			col := startCollector(t, svcs, c.override)
			col.send(t)
			docs := settle(t, svcs, func() ([][]byte, error) {
				docs := make([][]byte, len(svcs))
				for i, s := range svcs {
					doc, err := s.report()
					if err != nil {
						return nil, err
					}
					docs[i] = doc
				}
				return docs, nil
			}, col.Proc)
			problems, spread := checkRouting(svcs, docs)
			t.Logf("traces per instance: %v", spread)
			switch {
			case !c.wantProblems && len(problems) > 0:
				t.Errorf("%d problem(s) with the routing by trace id:\n%s", len(problems), listed(problems, 30))
			case c.wantProblems && len(problems) == 0:
				t.Errorf("routing by service found no problem: the checks cannot tell a split trace (traces per instance: %v)", spread)
			case c.wantProblems:
				t.Logf("routing by service, as it must, fails the checks with %d problem(s), first:\n%s", len(problems), listed(problems, 5))
			}
		})
	}
}

// checkRouting asserts what routing by trace id promises, from the
// instances' own answers: each of the sample's traces is on exactly one
// instance (GET /api/v1/traces/{id} answers 200 there and 404 on the
// others) with all its spans (as counted in the OTLP data); every instance
// has some traces; each instance's report counts the traces found on it,
// and the reports add up to the sample (spans, traces, and each API's
// traces as `analyze` of the whole sample counts them). It returns the
// problems found and the traces found on each instance.
func checkRouting(svcs []*service, docs [][]byte) (problems []string, spread []int) {
	ids := make([]string, 0, len(suite.perTrace))
	for id := range suite.perTrace {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	// found[i][id] is the span count instance i gives the trace (absent: 404).
	found := make([]map[string]int, len(svcs))
	errs := make([][]string, len(svcs))
	var wg sync.WaitGroup
	for i, s := range svcs {
		found[i] = map[string]int{}
		wg.Go(func() {
			for _, id := range ids {
				n, ok, err := traceSpans(s.http, id)
				switch {
				case err != nil:
					errs[i] = append(errs[i], fmt.Sprintf("%s: trace %s: %v", s.Name, id, err))
				case ok:
					found[i][id] = n
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		problems = append(problems, e...)
	}

	// Each trace's problems, listed after the whole-sample ones.
	var perTrace []string
	for _, id := range ids {
		var on []string
		for i := range svcs {
			if n, ok := found[i][id]; ok {
				on = append(on, fmt.Sprintf("%d span(s) on %s", n, svcs[i].Name))
			}
		}
		want := suite.perTrace[id]
		switch {
		case len(on) == 0:
			perTrace = append(perTrace, fmt.Sprintf("trace %s (%d spans) is on no instance", id, want))
		case len(on) > 1:
			perTrace = append(perTrace, fmt.Sprintf("trace %s (%d spans) is split: %s", id, want, strings.Join(on, ", ")))
		default:
			for i := range svcs {
				if n, ok := found[i][id]; ok && n != want {
					perTrace = append(perTrace, fmt.Sprintf("trace %s has %d of its %d spans on %s", id, n, want, svcs[i].Name))
				}
			}
		}
	}

	var spans, traces int
	apis := map[string]apiCounts{}
	for i, doc := range docs {
		var d struct {
			Spans, Traces int
			APIs          []apiCounts
		}
		if err := e2ekit.DecodeInto(doc, &d); err != nil {
			problems = append(problems, fmt.Sprintf("%s: report: %v", svcs[i].Name, err))
			continue
		}
		spread = append(spread, len(found[i]))
		if len(found[i]) == 0 {
			problems = append(problems, fmt.Sprintf("%s received no trace: the collector did not balance", svcs[i].Name))
		}
		if d.Traces != len(found[i]) {
			problems = append(problems, fmt.Sprintf("%s reports %d traces, %d of the sample's are there", svcs[i].Name, d.Traces, len(found[i])))
		}
		spans += d.Spans
		traces += d.Traces
		for _, a := range d.APIs {
			apis[a.API] = apis[a.API].add(a)
		}
	}
	if spans != suite.spans || traces != len(suite.perTrace) {
		problems = append(problems, fmt.Sprintf("the instances' reports add up to %d spans and %d traces; the sample has %d and %d",
			spans, traces, suite.spans, len(suite.perTrace)))
	}
	var ref struct{ APIs []apiCounts }
	if err := e2ekit.DecodeInto(suite.want, &ref); err != nil {
		problems = append(problems, "the reference: "+err.Error())
	}
	for _, a := range ref.APIs {
		got := apis[a.API]
		got.API = a.API
		if got != a {
			problems = append(problems, fmt.Sprintf("API %q: the instances' reports add up to %+v, `analyze` of the sample counts %+v",
				a.API, got, a))
		}
		delete(apis, a.API)
	}
	for api, n := range apis {
		problems = append(problems, fmt.Sprintf("API %q: %+v on the instances, not in `analyze` of the sample", api, n))
	}
	return append(problems, perTrace...), spread
}

// apiCounts are an API's figures that each trace adds to on its own (no
// figure learned across traces, such as a radius): the instances' reports
// add up to `analyze` of the whole sample in these.
type apiCounts struct {
	API                string `json:"api"`
	Traces             int    `json:"traces"`
	FailedTraces       int    `json:"failed_traces"`
	RootErrors         int    `json:"root_errors"`
	RemoteParentTraces int    `json:"remote_parent_traces"`
	Requests           int    `json:"requests"`
	FailureEvents      int    `json:"failure_events"`
}

func (a apiCounts) add(b apiCounts) apiCounts {
	a.Traces += b.Traces
	a.FailedTraces += b.FailedTraces
	a.RootErrors += b.RootErrors
	a.RemoteParentTraces += b.RemoteParentTraces
	a.Requests += b.Requests
	a.FailureEvents += b.FailureEvents
	return a
}

// traceSpans asks the instance whose API listens on addr for a trace: its
// span count and true, or false when the instance does not have it (404).
func traceSpans(addr, id string) (int, bool, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/traces/" + id)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, false, err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return 0, false, nil
	case http.StatusOK:
	default:
		return 0, false, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	var v struct {
		TraceID string `json:"trace_id"`
		Spans   *int   `json:"spans"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Spans == nil || v.TraceID != id {
		return 0, false, fmt.Errorf("not the trace's view (%v): %.200s", err, body)
	}
	return *v.Spans, true, nil
}

func listed(lines []string, n int) string {
	more := ""
	if len(lines) > n {
		more = fmt.Sprintf("\n... and %d more", len(lines)-n)
		lines = lines[:n]
	}
	return strings.Join(lines, "\n") + more
}

// Phase 2: the same collector config in front of three cmd/ingest over ONE
// ClickHouse store, each one named analysis partition (--partition
// shard-<i>, without Kafka); `stormradius report` of the store must equal
// `stormradius analyze` of the sample, the whole document. It skips,
// saying why, without STORMRADIUS_CLICKHOUSE.
func TestPartitions(t *testing.T) {
	t.Parallel()
	if os.Getenv(e2ekit.ClickHouseEnv) == "" {
		t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the partitioned ingest over ClickHouse")
	}
	setup(t)
	store := []string{"--store", freshClickHouse(t)}
	svcs := make([]*service, instances)
	// One after the other: the first creates the schema.
	for i := range svcs {
		s, err := tryService(t, fmt.Sprintf("ingest shard-%d", i), suite.ingest, store, "--partition", fmt.Sprintf("shard-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = s
	}
	col := startCollector(t, svcs, "")
	col.send(t)
	docs := settle(t, svcs, func() ([][]byte, error) {
		doc, err := svcs[0].report()
		return [][]byte{doc}, err
	}, col.Proc)
	compareDocs(t, "stormradius report of the partitioned store", docs[0])

	// Each partition stored its share, and the shares add up to the sample
	// (no trace sent to two: a retried batch would count twice).
	total := 0.0
	var per []string
	for _, s := range svcs {
		n, err := s.metric("stormradius_spans_stored_total")
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if n == 0 {
			t.Errorf("%s stored no span: the collector did not balance", s.Name)
		}
		total += n
		per = append(per, fmt.Sprintf("%s %v", s.Name, n))
	}
	t.Logf("spans stored: %s", strings.Join(per, ", "))
	if int(total) != suite.spans {
		t.Errorf("the partitions stored %v spans between them, the sample has %d", total, suite.spans)
	}
}
