package web_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/web"
)

// The deploy/ examples chart what /metrics exports.
func TestDeployExamples(t *testing.T) {
	now := time.Now()
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
