package web_test

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/web"
)

// The deploy/ examples ask what the gate understands and chart what
// /metrics exports.
func TestDeployExamples(t *testing.T) {
	now := time.Now()
	// Flagger: the webhook's metadata is a valid gate request.
	var canary struct {
		Spec struct {
			Analysis struct {
				Webhooks []struct {
					URL      string            `yaml:"url"`
					Metadata map[string]string `yaml:"metadata"`
				} `yaml:"webhooks"`
			} `yaml:"analysis"`
		} `yaml:"spec"`
	}
	readYAML(t, "../deploy/flagger/canary.yaml", &canary)
	hooks := canary.Spec.Analysis.Webhooks
	if len(hooks) != 1 || !strings.HasSuffix(hooks[0].URL, "/api/v1/gate") {
		t.Fatalf("flagger webhooks: %+v", hooks)
	}
	v := url.Values{}
	for k, val := range hooks[0].Metadata {
		v.Set(k, val)
	}
	if req, err := query.ParseGate(v, now); err != nil || req.Service == "" || req.BaselineVersion == "" {
		t.Errorf("flagger metadata: %+v %v", req, err)
	}

	// Argo Rollouts: the web metric's URL, its arguments filled in.
	var tmpl struct {
		Spec struct {
			Metrics []struct {
				SuccessCondition string `yaml:"successCondition"`
				Provider         struct {
					Web struct {
						URL      string `yaml:"url"`
						JSONPath string `yaml:"jsonPath"`
					} `yaml:"web"`
				} `yaml:"provider"`
			} `yaml:"metrics"`
		} `yaml:"spec"`
	}
	readYAML(t, "../deploy/argo-rollouts/analysis-template.yaml", &tmpl)
	m := tmpl.Spec.Metrics[0]
	raw := regexp.MustCompile(`\{\{ *args\.([a-z-]+) *\}\}`).ReplaceAllStringFunc(m.Provider.Web.URL, func(s string) string {
		return map[string]string{"api": "frontend%20GET%20%2Fdispatch", "service": "route"}[strings.Trim(s, "{} ")[5:]] + "x"
	})
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if req, err := query.ParseGate(u.Query(), now); err != nil || u.Query().Get("always_200") != "true" || u.Path != "/api/v1/gate" {
		t.Errorf("argo url %s: %+v %v", raw, req, err)
	}
	if m.Provider.Web.JSONPath != "{$.pass}" || m.SuccessCondition != "result == true" {
		t.Errorf("argo reads %q with %q", m.Provider.Web.JSONPath, m.SuccessCondition)
	}

	// Grafana: every metric a panel queries is one stormradius exports.
	b, err := os.ReadFile("../deploy/grafana/stormradius-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{"stormradius_spans_stored_total": true} // the pipeline's (its tests check it)
	ch := make(chan *prometheus.Desc, 32)
	web.NewCollector(&query.Service{}, now, nil, nil).Describe(ch)
	close(ch)
	for d := range ch {
		name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
		exported[name[1]] = true
	}
	metric := regexp.MustCompile(`stormradius_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				if !exported[name] {
					t.Errorf("the dashboard queries %s, which is not exported", name)
				}
			}
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
