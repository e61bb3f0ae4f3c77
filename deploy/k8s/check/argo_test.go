package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/expr-lang/expr"
	"github.com/valyala/fasttemplate"
	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"

	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/internal/storeurl"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// The Argo Rollouts template, beside deploy/k8s.
const argoTemplate = "../../argo-rollouts/analysis-template.yaml"

// The Argo Rollouts AnalysisTemplate as Argo Rollouts runs it, against the
// gate's real answers (the handler of serve and cmd/api over the rollout
// under the example's names, fixture.Example): the metric's arguments
// resolved as Argo resolves them, the request sent as its web provider
// sends it, the answer read with the JSONPath library it reads it with and
// judged with the expression language it judges with, and the measurements
// assessed as an AnalysisRun assesses them. Pass is Successful, fail
// Failed, undecided Inconclusive.
func TestArgoRolloutsTemplate(t *testing.T) {
	b, err := os.ReadFile(argoTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Spec struct {
			Args []struct {
				Name      string `yaml:"name"`
				ValueFrom any    `yaml:"valueFrom"`
			} `yaml:"args"`
			Metrics []map[string]any `yaml:"metrics"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Spec.Metrics) != 1 {
		t.Fatalf("%d metrics, want 1", len(tmpl.Spec.Metrics))
	}
	metric := tmpl.Spec.Metrics[0]
	args := argoExampleArgs(t, string(b))
	if want := `{"api":"frontend GET /dispatch","canary-version":"1.5.0","service":"route","stable-version":"1.4.2"}`; jsonOf(args) != want {
		t.Fatalf("the template's example passes %s, the test expects %s", jsonOf(args), want)
	}
	for _, a := range tmpl.Spec.Args {
		if _, ok := args[a.Name]; !ok && a.ValueFrom == nil {
			t.Errorf("the example gives no value for argument %q", a.Name)
		}
	}
	args["stormradius-token"] = "s3cret" // from the secret the template names
	// The assessment below is worked out for these.
	type metricLimits struct {
		Interval                                                      string
		Count, FailureLimit, InconclusiveLimit, ConsecutiveErrorLimit int
	}
	var limits metricLimits
	json.Unmarshal([]byte(jsonOf(metric)), &limits)
	if limits != (metricLimits{"2m", 5, 0, 2, 3}) {
		t.Fatalf("the metric's limits are %+v; the runs below are worked out for 2m, count 5, failureLimit 0, inconclusiveLimit 2, consecutiveErrorLimit 3", limits)
	}

	// The same metric written by hand with numbers in its jsonBody, as
	// YAML invites: "0" → 0, "50" → 50.
	var numbers map[string]any
	json.Unmarshal([]byte(jsonOf(metric)), &numbers)
	meta := numbers["provider"].(map[string]any)["web"].(map[string]any)["jsonBody"].(map[string]any)["metadata"].(map[string]any)
	meta["max_radius_increase"], meta["min_traces"] = 0, 50

	gate := exampleGate(t)
	minute := func(m int) time.Time { return fixture.Start.Add(time.Duration(m) * time.Minute) }
	later := with(args, "stable-version", "1.5.0", "canary-version", "1.5.1")
	// One measurement each.
	for _, c := range []struct {
		name   string
		now    time.Time
		metric map[string]any
		args   map[string]string
		phase  string
		value  string // in the measurement's value
	}{
		// 1.5.0 over 10:05–10:20: its naive retries, radius 2, against
		// 1.4.2's 1; and it sends no claims, where 1.4.2 claimed: the
		// gate's claim check says so second (its counts: web's gate tests).
		{"the example at 10:20: 1.5.0 widens the radius", minute(20), metric, args, "Failed",
			`"decision":"fail","pass":false,"reasons":["route 1.5.0: max radius 2 is 1 above route 1.4.2's 1 (allowed: 0)",` +
				`"candidate route 1.5.0: stopped claiming errors: 0 of `},
		// 1.5.1 over 10:15–10:30, radius 1, against 1.5.0's 2 (its fault's
		// last minute, 10:15, in the window).
		{"1.5.1 against 1.5.0 at 10:30", minute(30), metric, later, "Successful", `"decision":"pass","pass":true,"reasons":[]`},
		// 1.5.0 deployed at 10:10 has no traces before it (the store is by
		// the minute).
		{"the example at 10:10: 1.5.0 has no traces yet", minute(10), metric, args, "Inconclusive",
			`"decision":"undecided","pass":false,"reasons":["candidate route 1.5.0: effective sample size 0 below min_traces 50 (0 traces received)"]`},
		{"numbers in the body: 1.5.0", minute(20), numbers, args, "Failed", `"decision":"fail"`},
		{"numbers in the body: 1.5.1", minute(30), numbers, later, "Successful", `"decision":"pass"`},
		{"numbers in the body: no traces yet", minute(10), numbers, args, "Inconclusive", `"decision":"undecided"`},
	} {
		gate.now(c.now)
		m := argoMeasure(gate.url, c.metric, c.args)
		if m.phase != c.phase || !strings.Contains(m.value, c.value) {
			t.Errorf("%s: measurement %s %q (%v), want %s with %s", c.name, m.phase, m.value, m.err, c.phase, c.value)
		}
	}
	// Analysis runs: a measurement every interval, assessed after each.
	for _, c := range []struct {
		name   string
		start  time.Time
		frozen bool // the store as it was at start, every measurement
		args   map[string]string
		want   string
	}{
		// No traces yet, then 1.5.0's first two minutes (radius 1 at most,
		// as 1.4.2's: its fault starts at 10:12), then the fault.
		{"1.5.0 deployed at 10:10", minute(10), false, args,
			"10:10 Inconclusive, 10:12 Successful, 10:14 Failed: run Failed (failed (1) > failureLimit (0))"},
		// A canary that gets no traffic pauses the rollout for a person.
		{"a canary without traffic", minute(20), false, with(args, "canary-version", "1.6.0"),
			"10:20 Inconclusive, 10:22 Inconclusive, 10:24 Inconclusive: run Inconclusive (inconclusive (3) > inconclusiveLimit (2))"},
		{"1.5.1 against 1.5.0, the store as at 10:30", minute(30), true, later,
			"10:30 Successful, 10:32 Successful, 10:34 Successful, 10:36 Successful, 10:38 Successful: run Successful (count 5)"},
	} {
		var got []string
		run := analysisRun{count: limits.Count, failureLimit: limits.FailureLimit, inconclusiveLimit: limits.InconclusiveLimit, errorLimit: limits.ConsecutiveErrorLimit}
		for i := range 10 {
			at := c.start.Add(time.Duration(2*i) * time.Minute)
			gate.now(c.start)
			if !c.frozen {
				gate.now(at)
			}
			m := argoMeasure(gate.url, metric, c.args)
			got = append(got, at.Format("15:04")+" "+m.phase)
			if phase, why := run.assess(m.phase); phase != "Running" {
				got[len(got)-1] += ": run " + phase + " (" + why + ")"
				break
			}
		}
		if s := strings.Join(got, ", "); s != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, s, c.want)
		}
	}
	// A misspelt parameter is a 400, which the web provider takes for an
	// error: never a pass.
	var typo map[string]any
	json.Unmarshal([]byte(jsonOf(metric)), &typo)
	tm := typo["provider"].(map[string]any)["web"].(map[string]any)["jsonBody"].(map[string]any)["metadata"].(map[string]any)
	tm["max_radius_increas"] = tm["max_radius_increase"]
	delete(tm, "max_radius_increase")
	gate.now(minute(20))
	if m := argoMeasure(gate.url, typo, args); m.phase != "Error" || !strings.Contains(fmt.Sprint(m.err), "received non 2xx response code: 400") {
		t.Errorf("a misspelt parameter: %s %v", m.phase, m.err)
	}
}

// exampleServer is the gate over the example rollout, at a time of the
// test's choosing.
type exampleServer struct {
	url string
	mu  sync.Mutex
	at  time.Time
}

func (s *exampleServer) now(t time.Time) {
	s.mu.Lock()
	s.at = t
	s.mu.Unlock()
}

// exampleGate serves the gate (web.Handler, as serve and cmd/api do) over
// an embedded store loaded with fixture.Example, with the template's
// secret as its token.
func exampleGate(t *testing.T) *exampleServer {
	t.Helper()
	traces, err := fixture.Example()
	if err != nil {
		t.Fatal(err)
	}
	st, err := storeurl.Open(context.Background(), storeurl.Options{Data: t.TempDir(), Window: fixture.Window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fixture.Load(t, st, traces)
	s := &exampleServer{}
	srv := httptest.NewServer(web.Handler(query.New(store.Store(st)), web.Config{Tokens: []string{"s3cret"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.at
		}}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// argoExampleArgs reads the arguments of the Rollout example in the
// template's comments.
func argoExampleArgs(t *testing.T, tmpl string) map[string]string {
	t.Helper()
	_, example, ok := strings.Cut(tmpl, "# Used from a Rollout's canary strategy:\n")
	if !ok {
		t.Fatal("the template has no Rollout example")
	}
	var doc strings.Builder
	for _, line := range strings.Split(example, "\n") {
		if rest, ok := strings.CutPrefix(line, "#  "); ok {
			doc.WriteString(rest + "\n")
		} else if line != "#" {
			break
		}
	}
	var r struct {
		Strategy struct {
			Canary struct {
				Steps []struct {
					Analysis *struct {
						Args []struct{ Name, Value string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(doc.String()), &r); err != nil {
		t.Fatalf("the Rollout example: %v\n%s", err, doc.String())
	}
	out := map[string]string{}
	for _, s := range r.Strategy.Canary.Steps {
		if s.Analysis != nil {
			for _, a := range s.Analysis.Args {
				out[a.Name] = a.Value
			}
		}
	}
	return out
}

// measurement is one of a metric's: its phase and value, as Argo records
// them.
type measurement struct {
	phase, value string
	err          error
}

// argoMeasure takes one measurement of metric as Argo Rollouts does:
//
//   - utils/analysis.ResolveMetricArgs: the metric as JSON, every
//     {{ args.NAME }} replaced (valyala/fasttemplate) by the value escaped
//     as inside a JSON string (utils/template.ResolveQuotedArgs), an
//     unknown tag an error;
//   - metricproviders/webmetric.Run: method GET unless given, a body only
//     with POST or PUT, jsonBody as JSON with Content-Type
//     application/json, the headers set, timeoutSeconds (10 s unless
//     given), any non-2xx answer an error;
//   - parseResponse: the body as JSON, the jsonPath ({$} unless given)
//     found by k8s.io/client-go/util/jsonpath, the first result the
//     value;
//   - utils/evaluate.EvaluateResult: successCondition and failureCondition
//     evaluated by expr-lang/expr with result and Argo's functions in the
//     environment; failed when the failure condition holds (or, without
//     one, the success condition does not), successful when the success
//     condition holds (or, without one, the failure condition does not),
//     inconclusive when neither.
//
// The gate's address replaces the template's.
func argoMeasure(base string, metric map[string]any, args map[string]string) measurement {
	errored := func(err error) measurement { return measurement{phase: "Error", err: err} }
	raw, err := json.Marshal(metric)
	if err != nil {
		return errored(err)
	}
	tpl, err := fasttemplate.NewTemplate(string(raw), "{{", "}}")
	if err != nil {
		return errored(err)
	}
	var unresolved error
	resolved := tpl.ExecuteFuncString(func(w io.Writer, tag string) (int, error) {
		name, ok := strings.CutPrefix(strings.TrimSpace(tag), "args.")
		v, found := args[name]
		if !ok || !found {
			unresolved = fmt.Errorf("failed to resolve {{%s}}", tag)
			return w.Write(nil)
		}
		q := strconv.Quote(v)
		return w.Write([]byte(q[1 : len(q)-1]))
	})
	if unresolved != nil {
		return errored(unresolved)
	}
	var m struct {
		SuccessCondition string `json:"successCondition"`
		FailureCondition string `json:"failureCondition"`
		Provider         struct {
			Web *struct {
				Method  string `json:"method"`
				URL     string `json:"url"`
				Headers []struct {
					Key   string `json:"key"`
					Value string `json:"value"`
				} `json:"headers"`
				Body           string          `json:"body"`
				JSONBody       json.RawMessage `json:"jsonBody"`
				TimeoutSeconds int64           `json:"timeoutSeconds"`
				JSONPath       string          `json:"jsonPath"`
			} `json:"web"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(resolved), &m); err != nil {
		return errored(err)
	}
	w := m.Provider.Web
	if w == nil {
		return errored(errors.New("not a web metric"))
	}
	method := w.Method
	if method == "" {
		method = "GET"
	}
	var body io.Reader
	switch {
	case w.Body != "" && w.JSONBody != nil:
		return errored(errors.New("use either Body or JSONBody; both cannot exists for WebMetric payload"))
	case (w.Body != "" || w.JSONBody != nil) && method == "GET":
		return errored(errors.New("Body/JSONBody can only be used with POST or PUT WebMetric Method types"))
	case w.Body != "":
		body = strings.NewReader(w.Body)
	case w.JSONBody != nil:
		body = bytes.NewReader(w.JSONBody)
	}
	u := w.URL
	if i := strings.Index(u, "/api/"); i >= 0 {
		u = base + u[i:]
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return errored(err)
	}
	for _, h := range w.Headers {
		req.Header.Set(h.Key, h.Value)
	}
	if w.JSONBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	timeout := time.Duration(w.TimeoutSeconds) * time.Second
	if w.TimeoutSeconds <= 0 {
		timeout = 10 * time.Second
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return errored(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return errored(fmt.Errorf("received non 2xx response code: %v", resp.StatusCode))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return errored(err)
	}
	var data any
	var value any
	var valueString string
	if err := json.Unmarshal(b, &data); err != nil {
		value, valueString = string(b), string(b)
	} else {
		jp := jsonpath.New("metrics")
		path := w.JSONPath
		if path == "" {
			path = "{$}"
		}
		if err := jp.Parse(path); err != nil {
			return errored(err)
		}
		results, err := jp.FindResults(data)
		if err != nil {
			return errored(fmt.Errorf("Could not find JSONPath in body: %s", err))
		}
		found := false
		for _, rs := range results {
			if len(rs) > 0 {
				value = rs[0].Interface()
				vb, err := json.Marshal(value)
				if err != nil {
					return errored(err)
				}
				valueString, found = string(vb), true
				break
			}
		}
		if !found {
			return errored(errors.New("result of web metric produced no value"))
		}
	}
	phase, err := evaluateResult(value, m.SuccessCondition, m.FailureCondition)
	return measurement{phase: phase, value: valueString, err: err}
}

// evaluateResult is utils/evaluate.EvaluateResult.
func evaluateResult(result any, successCondition, failureCondition string) (string, error) {
	success, fail := false, false
	var err error
	if successCondition != "" {
		if success, err = evalCondition(result, successCondition); err != nil {
			return "Error", err
		}
	}
	if failureCondition != "" {
		if fail, err = evalCondition(result, failureCondition); err != nil {
			return "Error", err
		}
	}
	switch {
	case successCondition == "" && failureCondition == "":
		return "Successful", nil
	case successCondition != "" && failureCondition == "":
		fail = !success
	case successCondition == "" && failureCondition != "":
		success = !fail
	}
	switch {
	case fail:
		return "Failed", nil
	case !success:
		return "Inconclusive", nil
	}
	return "Successful", nil
}

// evalCondition is utils/evaluate.EvalCondition: the condition compiled
// and run by expr-lang/expr over result and Argo's functions.
func evalCondition(result any, condition string) (bool, error) {
	isNil := func(v any) bool {
		if v == nil {
			return true
		}
		switch reflect.TypeOf(v).Kind() {
		case reflect.Pointer, reflect.Map, reflect.Array, reflect.Chan, reflect.Slice:
			return reflect.ValueOf(v).IsNil()
		}
		return false
	}
	env := map[string]any{
		"result":  result,
		"asInt":   func(in string) int64 { n, err := strconv.ParseInt(in, 10, 64); must(err); return n },
		"asFloat": func(in string) float64 { x, err := strconv.ParseFloat(in, 64); must(err); return x },
		"isNaN":   math.IsNaN,
		"isInf":   func(f float64) bool { return math.IsInf(f, 0) },
		"isNil":   func(any) bool { return isNil(result) },
		"default": func(_, d any) any {
			if isNil(result) {
				return d
			}
			return result
		},
	}
	program, err := expr.Compile(condition, expr.Env(env))
	if err != nil {
		return false, err
	}
	out, err := expr.Run(program, env)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("expected bool, but got %T", out)
	}
	return b, nil
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// analysisRun assesses a metric's measurements as analysis.assessMetricStatus
// does, for a metric with a count and no consecutiveSuccessLimit.
type analysisRun struct {
	count, failureLimit, inconclusiveLimit, errorLimit int
	// Counted as analysis.go counts them: an error is not in measured.
	measured, failed, inconclusive, consecutiveErrors int
}

// assess adds a measurement and returns the metric's phase: Running until
// a limit is passed or the count is reached.
func (r *analysisRun) assess(phase string) (string, string) {
	switch phase {
	case "Failed":
		r.failed++
	case "Inconclusive":
		r.inconclusive++
	}
	if phase == "Error" {
		r.consecutiveErrors++
	} else {
		r.measured++
		r.consecutiveErrors = 0
	}
	out, why := "", ""
	if r.failureLimit >= 0 && r.failed > r.failureLimit {
		out, why = "Failed", fmt.Sprintf("failed (%d) > failureLimit (%d)", r.failed, r.failureLimit)
	}
	if r.inconclusive > r.inconclusiveLimit {
		out, why = "Inconclusive", fmt.Sprintf("inconclusive (%d) > inconclusiveLimit (%d)", r.inconclusive, r.inconclusiveLimit)
	}
	if r.consecutiveErrors > r.errorLimit {
		out, why = "Error", fmt.Sprintf("consecutiveErrors (%d) > consecutiveErrorLimit (%d)", r.consecutiveErrors, r.errorLimit)
	}
	switch {
	case out != "":
		return out, why
	case r.measured >= r.count:
		return "Successful", fmt.Sprintf("count %d", r.count)
	}
	return "Running", ""
}

// with returns a copy of args with the pairs kv set.
func with(args map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range args {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
