package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/internal/fixture"
	"github.com/stormradius/stormradius/store"
	"github.com/stormradius/stormradius/web"
)

// exampleRollout is the rollout under the names the deploy/ examples use:
// the root API "frontend GET /dispatch", whose router "route" goes from
// 1.4.2 (radius 1) to 1.5.0 (naive retries, radius 2, amplification 6),
// then 1.5.1 (radius 1, amplification 2).
var exampleRollout = sync.OnceValues(func() ([][]graph.Span, error) {
	traces, err := fixture.Rollout("")
	if err != nil {
		return nil, err
	}
	versions := map[string]string{"1.0": "1.4.2", "2.0": "1.5.0", "2.1": "1.5.1"}
	for _, tr := range traces {
		for i := range tr {
			switch sp := &tr[i]; sp.Service {
			case "front":
				sp.Service = "frontend"
			case "route":
				sp.Version = versions[sp.Version]
			}
		}
	}
	return traces, nil
})

// exampleStores runs fn against each store (as stores does) loaded with
// exampleRollout.
func exampleStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	traces, err := exampleRollout()
	if err != nil {
		t.Fatal(err)
	}
	storesWith(t, traces, fn)
}

// The rollout as the deploy/ examples are written: at 10:20 the canary
// route 1.5.0 has widened the radius of "frontend GET /dispatch" from 1 to
// 2 over the last 15 minutes, and the gate fails it; at 10:30 route 1.5.1
// (against 1.5.0) passes.
var (
	exampleFail = fixture.Start.Add(20 * time.Minute)
	examplePass = fixture.End
)

// The Argo Rollouts AnalysisTemplate as Argo runs it, with the arguments of
// its own example: substituted verbatim, sent by a Go http.Client to a real
// server, the measurement read as the web provider reads it.
func TestArgoRolloutsTemplate(t *testing.T) {
	tmplPath := "../deploy/argo-rollouts/analysis-template.yaml"
	b, err := os.ReadFile(tmplPath)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Spec struct {
			Args []struct {
				Name      string
				ValueFrom any `yaml:"valueFrom"`
			}
			Metrics []map[string]any
		}
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Spec.Metrics) != 1 {
		t.Fatalf("%d metrics, want 1", len(tmpl.Spec.Metrics))
	}
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

	// The same metric written by hand with numbers in its jsonBody, as
	// YAML invites: "0" → 0, "50" → 50.
	var numbers map[string]any
	json.Unmarshal([]byte(jsonOf(tmpl.Spec.Metrics[0])), &numbers)
	meta := numbers["provider"].(map[string]any)["web"].(map[string]any)["jsonBody"].(map[string]any)["metadata"].(map[string]any)
	meta["max_radius_increase"], meta["min_traces"] = 0, 50

	exampleStores(t, func(t *testing.T, st store.Store) {
		for _, c := range []struct {
			name       string
			now        time.Time
			metric     map[string]any
			args       map[string]string
			successful bool
		}{
			{"the example: 1.5.0 widens the radius", exampleFail, tmpl.Spec.Metrics[0], args, false},
			{"1.5.1 against 1.5.0", examplePass, tmpl.Spec.Metrics[0], with(args, "stable-version", "1.5.0", "canary-version", "1.5.1"), true},
			{"numbers in the body: 1.5.0", exampleFail, numbers, args, false},
			{"numbers in the body: 1.5.1", examplePass, numbers, with(args, "stable-version", "1.5.0", "canary-version", "1.5.1"), true},
		} {
			srv := serve(t, st, web.Config{Tokens: []string{"s3cret"}, Now: func() time.Time { return c.now }})
			phase, value, err := argoMeasure(srv, c.metric, c.args)
			if err != nil {
				t.Errorf("%s: the measurement is an error (three abort the rollout): %v", c.name, err)
				continue
			}
			want := map[bool]string{true: "Successful", false: "Failed"}[c.successful]
			if phase != want {
				t.Errorf("%s: measurement %s (result %s), want %s", c.name, phase, value, want)
			}
		}
	})
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

// argoMeasure takes one measurement of metric as Argo Rollouts does
// (metricproviders/webmetric): the metric's arguments resolved as
// utils/analysis.ResolveMetricArgs resolves them — the metric as JSON,
// every {{ args.NAME }} replaced by the value, escaped as inside a JSON
// string and otherwise verbatim —, the request built with
// http.NewRequest(method, url, body), its headers set, Content-Type JSON
// with a jsonBody, a non-2xx answer an error, the result the jsonPath of
// the answer and the phase successCondition's verdict. The server's
// address replaces the template's.
func argoMeasure(srv *httptest.Server, metric map[string]any, args map[string]string) (phase, value string, err error) {
	raw, err := json.Marshal(metric)
	if err != nil {
		return "", "", err
	}
	var unresolved error
	resolved := regexp.MustCompile(`\{\{(.*?)\}\}`).ReplaceAllStringFunc(string(raw), func(tag string) string {
		name, ok := strings.CutPrefix(strings.TrimSpace(tag[2:len(tag)-2]), "args.")
		v, found := args[name]
		if !ok || !found {
			unresolved = fmt.Errorf("failed to resolve %s", tag)
			return ""
		}
		q := strconv.Quote(v)
		return q[1 : len(q)-1]
	})
	if unresolved != nil {
		return "", "", unresolved
	}
	var m struct {
		SuccessCondition string `json:"successCondition"`
		Provider         struct {
			Web struct {
				Method         string `json:"method"`
				URL            string `json:"url"`
				Headers        []struct{ Key, Value string }
				Body           string          `json:"body"`
				JSONBody       json.RawMessage `json:"jsonBody"`
				TimeoutSeconds int64           `json:"timeoutSeconds"`
				JSONPath       string          `json:"jsonPath"`
			} `json:"web"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(resolved), &m); err != nil {
		return "", "", err
	}
	w := m.Provider.Web
	method := w.Method
	if method == "" {
		method = "GET"
	}
	var body io.Reader
	switch {
	case w.Body != "" && w.JSONBody != nil:
		return "", "", fmt.Errorf("use either Body or JSONBody")
	case (w.Body != "" || w.JSONBody != nil) && method == "GET":
		return "", "", fmt.Errorf("Body/JSONBody can only be used with POST or PUT")
	case w.Body != "":
		body = strings.NewReader(w.Body)
	case w.JSONBody != nil:
		body = bytes.NewReader(w.JSONBody)
	}
	u := w.URL
	if i := strings.Index(u, "/api/"); i >= 0 {
		u = srv.URL + u[i:]
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return "", "", err
	}
	for _, h := range w.Headers {
		req.Header.Set(h.Key, h.Value)
	}
	if w.JSONBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := *srv.Client()
	client.Timeout = time.Duration(w.TimeoutSeconds) * time.Second
	resp, err := client.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return "", "", fmt.Errorf("received non 2xx response code: %v (%s)", resp.StatusCode, bytes.TrimSpace(b))
	}
	// The template reads {$.pass} and succeeds on result == true: the
	// only jsonPath and condition this reading knows.
	if w.JSONPath != "{$.pass}" || m.SuccessCondition != "result == true" {
		return "", "", fmt.Errorf("jsonPath %q and successCondition %q: the test reads {$.pass} and result == true", w.JSONPath, m.SuccessCondition)
	}
	var d struct{ Pass *bool }
	if err := json.Unmarshal(b, &d); err != nil || d.Pass == nil {
		return "", "", fmt.Errorf("could not find JSONPath in body %s", b)
	}
	if *d.Pass {
		return "Successful", "true", nil
	}
	return "Failed", "false", nil
}

// Flagger's canary webhook as Flagger calls it (pkg/controller/webhook.go):
// the metadata as written, POSTed as {"name", "namespace", "phase",
// "checksum", "metadata"} to the webhook's URL, any status above 202 a
// failed check.
func TestFlaggerCanary(t *testing.T) {
	var canary struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			Analysis struct {
				Webhooks []struct {
					Name, Type, URL, Timeout string
					Metadata                 map[string]string
				}
			}
		}
	}
	readYAML(t, "../deploy/flagger/canary.yaml", &canary)
	hooks := canary.Spec.Analysis.Webhooks
	if len(hooks) != 1 || hooks[0].Type != "rollout" {
		t.Fatalf("flagger webhooks: %+v", hooks)
	}
	hook := hooks[0]
	exampleStores(t, func(t *testing.T, st store.Store) {
		for _, c := range []struct {
			name string
			now  time.Time
			meta map[string]string
			pass bool
		}{
			{"the example: 1.5.0 widens the radius", exampleFail, hook.Metadata, false},
			{"1.5.1 against 1.5.0", examplePass, withMap(hook.Metadata, "baseline", "1.5.0", "candidate", "1.5.1"), true},
		} {
			srv := serve(t, st, web.Config{Now: func() time.Time { return c.now }})
			payload, _ := json.Marshal(map[string]any{"name": canary.Metadata.Name, "namespace": canary.Metadata.Namespace,
				"phase": "Progressing", "checksum": "6c4b", "metadata": c.meta})
			u, err := url.Parse(hook.URL)
			if err != nil {
				t.Fatal(err)
			}
			timeout, err := time.ParseDuration(hook.Timeout)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("POST", srv.URL+u.RequestURI(), bytes.NewReader(payload))
			req.Header.Set("Content-Type", "application/json")
			client := *srv.Client()
			client.Timeout = timeout
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var d struct {
				Pass    bool
				Reasons []string
			}
			json.Unmarshal(b, &d)
			if passed := resp.StatusCode <= 202; passed != c.pass || d.Pass != c.pass || resp.StatusCode != map[bool]int{true: 200, false: 412}[c.pass] {
				t.Errorf("%s: %d %s, want the check to pass: %v", c.name, resp.StatusCode, b, c.pass)
			}
			if !c.pass && !strings.Contains(strings.Join(d.Reasons, "; "), "route 1.5.0: max radius 2 is 1 above route 1.4.2's 1 (allowed: 0)") {
				t.Errorf("%s: reasons %q", c.name, d.Reasons)
			}
		}
	})
}

// with returns a copy of args with the pairs kv set.
func with(args map[string]string, kv ...string) map[string]string { return withMap(args, kv...) }

func withMap(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
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
