package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// exampleRollout is the rollout under the names the deploy/ examples use
// (fixture.Example). The Argo Rollouts template is run as Argo runs it by
// deploy/k8s/check, a module of its own (Argo's JSONPath and expression
// libraries).
var exampleRollout = sync.OnceValues(fixture.Example)

// exampleStores runs fn against each store (as stores does) loaded with
// exampleRollout.
func exampleStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	traces, err := exampleRollout()
	if err != nil {
		t.Fatal(err)
	}
	storesWith(t, traces, fn)
}

// flaggerHook is a webhook of the example canary.
type flaggerHook struct {
	Name, Type, URL, Timeout string
	Metadata                 map[string]string
}

// The Flagger canary as Flagger runs it (pkg/controller: scheduler.go,
// scheduler_hooks.go, webhook.go), one iteration a minute (the example's
// interval): every rollout hook POSTed {"name", "namespace", "phase":
// "Progressing", "checksum", "metadata"} with the metadata as written, any
// status above 202 a failed check; the failed checks reaching the
// threshold roll the canary back; else the weight goes up by stepWeight,
// and at maxWeight the confirm-promotion hooks are asked, any status above
// 202 holding the promotion (not a failed check). The first hook is called
// at the canary's first step (Flagger routes stepWeight before it).
func TestFlaggerCanary(t *testing.T) {
	var canary struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			Analysis struct {
				Interval   string
				Threshold  int
				MaxWeight  int `yaml:"maxWeight"`
				StepWeight int `yaml:"stepWeight"`
				Webhooks   []flaggerHook
			}
		}
	}
	readYAML(t, "../deploy/flagger/canary.yaml", &canary)
	a := canary.Spec.Analysis
	if a.Interval != "1m" || a.Threshold != 3 || a.StepWeight != 10 || a.MaxWeight != 50 {
		t.Fatalf("the example's analysis is %+v; the timelines below are worked out for 1m, threshold 3, steps of 10 to 50", a)
	}
	// A rollout hook asks the gate each iteration (undecided: not a failed
	// check while the canary is young); a confirm-promotion hook holds the
	// promotion until the gate passes it (undecided: held).
	hooks := a.Webhooks
	if len(hooks) != 2 || hooks[0].Type != "rollout" || hooks[1].Type != "confirm-promotion" ||
		hooks[0].Metadata["undecided"] != "10m" || hooks[1].Metadata["undecided"] != "fail" {
		t.Fatalf("flagger webhooks: %+v", hooks)
	}
	if m0, m1 := withMap(hooks[0].Metadata, "undecided", ""), withMap(hooks[1].Metadata, "undecided", ""); !maps.Equal(m0, m1) || hooks[0].URL != hooks[1].URL {
		t.Errorf("the two hooks ask different questions:\n%v\n%v", hooks[0], hooks[1])
	}
	minute := func(h, m int) time.Time { return fixture.Start.Add(time.Duration((h-10)*60+m) * time.Minute) }
	exampleStores(t, func(t *testing.T, st store.Store) {
		for _, c := range []struct {
			name     string
			start    time.Time
			frozen   bool // the store as it was at start, every iteration
			candMeta []string
			want     []string          // what Flagger does at each iteration
			reasons  map[string]string // the gate's last reason at some
		}{
			// 1.5.0 has no traces in its first minute (the store is by the
			// minute): undecided, not a failed check; then its first two
			// minutes, before the driver's fault (minute 12), are a storm of
			// radius 1 at most, as 1.4.2's; then the fault, radius 2.
			{"the example: 1.5.0 deployed at 10:10", minute(10, 10), false, nil, []string{
				"10:10 200 weight 20", "10:11 200 weight 30", "10:12 200 weight 40",
				"10:13 412 failed check 1", "10:14 412 failed check 2", "10:15 412 failed check 3", "10:16 rollback"},
				map[string]string{
					"10:10": "undecided, answered 200 while canary prod/route is young: this gate first saw it 0s ago, undecided=10m0s",
					"10:13": "route 1.5.0: max radius 2 is 1 above route 1.4.2's 1 (allowed: 0)"}},
			// A canary that gets no traffic is never promoted: young, it
			// advances and its promotion is held; ten minutes after its
			// first hook its checks fail.
			{"a canary without traffic", minute(10, 20), false, []string{"candidate", "1.6.0"}, []string{
				"10:20 200 weight 20", "10:21 200 weight 30", "10:22 200 weight 40", "10:23 200 weight 50",
				"10:24 200 promotion held (412)", "10:25 200 promotion held (412)", "10:26 200 promotion held (412)",
				"10:27 200 promotion held (412)", "10:28 200 promotion held (412)", "10:29 200 promotion held (412)",
				"10:30 412 failed check 1", "10:31 412 failed check 2", "10:32 412 failed check 3", "10:33 rollback"},
				map[string]string{
					"10:24": "candidate route 1.6.0: effective sample size 0 below min_traces 50 (0 traces received)",
					"10:29": "this gate first saw it 9m0s ago, undecided=10m0s",
					"10:30": "undecided, answered 412: this gate first saw canary prod/route 10m0s ago (2026-03-02T10:20:00Z), longer than undecided=10m0s"}},
			// 1.5.1 against 1.5.0 over 10:15–10:30 (1.5.0's fault minute 15
			// in it: radius 2 against 1.5.1's 1), the store as at 10:30.
			{"1.5.1 against 1.5.0", minute(10, 30), true, []string{"baseline", "1.5.0", "candidate", "1.5.1"}, []string{
				"10:30 200 weight 20", "10:31 200 weight 30", "10:32 200 weight 40", "10:33 200 weight 50", "10:34 200 promoted"},
				map[string]string{"10:30": "", "10:34": ""}},
		} {
			clock := c.start
			srv := serve(t, st, web.Config{Now: func() time.Time { return clock }})
			var got []string
			last := map[string]string{}
			weight, failed := a.StepWeight, 0
			for i := range 20 {
				at := c.start.Add(time.Duration(i) * time.Minute)
				if !c.frozen {
					clock = at
				}
				line := at.Format("15:04")
				if failed >= a.Threshold {
					got = append(got, line+" rollback")
					break
				}
				status, reasons := callHook(t, srv.URL, hooks[0], canary.Metadata.Name, canary.Metadata.Namespace, c.candMeta)
				last[at.Format("15:04")] = strings.Join(reasons, "; ")
				line += fmt.Sprint(" ", status)
				if status > 202 {
					failed++
					line += fmt.Sprint(" failed check ", failed)
				} else if weight < a.MaxWeight {
					weight += a.StepWeight
					line += fmt.Sprint(" weight ", weight)
				} else if status, _ = callHook(t, srv.URL, hooks[1], canary.Metadata.Name, canary.Metadata.Namespace, c.candMeta); status > 202 {
					line += fmt.Sprintf(" promotion held (%d)", status)
				} else {
					got = append(got, line+" promoted")
					break
				}
				got = append(got, line)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("%s:\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			for at, want := range c.reasons {
				if r, ok := last[at]; !ok || !strings.Contains(r, want) || (want == "") != (r == "") {
					t.Errorf("%s: the rollout hook at %s said %q, want %q", c.name, at, r, want)
				}
			}
		}
	})
}

// callHook POSTs Flagger's payload (CanaryWebhookPayload) to the hook's
// URL on the test server, the metadata as written with kv set, and
// returns the status and the decision's reasons.
func callHook(t *testing.T, base string, h flaggerHook, name, namespace string, kv []string) (int, []string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"name": name, "namespace": namespace,
		"phase": "Progressing", "checksum": "6c4b8d9f7", "metadata": withMap(h.Metadata, kv...)})
	u, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	timeout, err := time.ParseDuration(h.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+u.RequestURI(), bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d struct {
		Decision string
		Reasons  []string
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Decision == "" {
		t.Fatalf("%s: %d %s", h.Name, resp.StatusCode, b)
	}
	return resp.StatusCode, d.Reasons
}

func withMap(m map[string]string, kv ...string) map[string]string {
	out := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}
