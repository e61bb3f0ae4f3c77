package deploy

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The sampling configs in deploy/collector hold, in their own settings,
// what e2e/sampling checks on a running collector (which takes minutes to
// build); these checks need no collector, so an edit that breaks the
// promise fails in the main module's tests already.

// collectorConfig is the part of a collector config these checks read.
type collectorConfig struct {
	Processors map[string]yaml.Node `yaml:"processors"`
	Service    struct {
		Pipelines map[string]struct {
			Processors []string `yaml:"processors"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

// readCollectorConfig reads deploy/collector/name with every ${env:…} at
// its default, and returns its text and settings.
func readCollectorConfig(t *testing.T, name string) (string, collectorConfig) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "collector", name))
	if err != nil {
		t.Fatal(err)
	}
	text := collectorVar.ReplaceAllString(string(b), "$2")
	var c collectorConfig
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(b), c
}

// processor decodes the settings of the processor named name into v.
func (c collectorConfig) processor(t *testing.T, name string, v any) {
	t.Helper()
	n, ok := c.Processors[name]
	if !ok {
		t.Fatalf("no processor %s", name)
	}
	if err := n.Decode(v); err != nil {
		t.Fatalf("processor %s: %v", name, err)
	}
}

// adjustedCountStatement is a statement of tail-sampling.yaml's transform:
// the adjusted count a policy's name gives.
var adjustedCountStatement = regexp.MustCompile(`^set\(span\.attributes\["sampling\.adjusted_count"\], (.+)\) where scope\.attributes\["tailsampling\.policy"\] == "([^"]+)"`)

// tail-sampling.yaml: tail_sampling records the first policy (in order)
// that kept a trace, so the error policy comes first; the transform after
// it gives each policy's name its adjusted count — 1 for errors, 100/pct
// for the probabilistic policy — and names no other policy; the command
// line it documents turns the recording on.
func TestTailSamplingConfig(t *testing.T) {
	text, c := readCollectorConfig(t, "tail-sampling.yaml")
	if !strings.Contains(text, "--feature-gates=processor.tailsamplingprocessor.recordpolicy") {
		t.Error("tail-sampling.yaml does not say to run the collector with --feature-gates=processor.tailsamplingprocessor.recordpolicy, without which nothing is recorded")
	}
	procs := c.Service.Pipelines["traces"].Processors
	ts := slices.Index(procs, "tail_sampling")
	var transform string
	for _, p := range procs {
		if strings.HasPrefix(p, "transform") {
			transform = p
		}
	}
	if ts < 0 || transform == "" || slices.Index(procs, transform) < ts {
		t.Fatalf("the traces pipeline runs %v: want tail_sampling, then the transform that reads its policy names", procs)
	}

	var tsCfg struct {
		DecisionCache struct {
			Sampled int `yaml:"sampled_cache_size"`
		} `yaml:"decision_cache"`
		Policies []struct {
			Name          string `yaml:"name"`
			Type          string `yaml:"type"`
			Probabilistic struct {
				Pct float64 `yaml:"sampling_percentage"`
			} `yaml:"probabilistic"`
			StatusCode struct {
				Codes []string `yaml:"status_codes"`
			} `yaml:"status_code"`
		} `yaml:"policies"`
	}
	c.processor(t, "tail_sampling", &tsCfg)
	if tsCfg.DecisionCache.Sampled <= 0 {
		t.Error("tail_sampling has no sampled decision cache: late spans of kept traces would come without the policy's name, hence without an adjusted count")
	}
	want := map[string]string{} // policy name → its adjusted count
	errorsAt := -1
	for i, p := range tsCfg.Policies {
		switch p.Type {
		case "status_code":
			if slices.Equal(p.StatusCode.Codes, []string{"ERROR"}) {
				want[p.Name], errorsAt = "1", i
			}
		case "probabilistic":
			if p.Probabilistic.Pct <= 0 || p.Probabilistic.Pct > 100 || math.Mod(100, p.Probabilistic.Pct) != 0 {
				t.Errorf("policy %s samples %v %%: want a percentage whose adjusted count 100/pct is a whole number", p.Name, p.Probabilistic.Pct)
			}
			want[p.Name] = strconv.FormatFloat(100/p.Probabilistic.Pct, 'f', -1, 64)
		case "drop":
		default:
			t.Errorf("policy %s (%s): the transform gives no adjusted count for it", p.Name, p.Type)
		}
	}
	if errorsAt != 0 {
		t.Errorf("the status_code ERROR policy is policy %d: it must come first, to be the one recorded when the probabilistic policy keeps a trace too", errorsAt)
	}

	var tfCfg struct {
		Statements []string `yaml:"trace_statements"`
	}
	c.processor(t, transform, &tfCfg)
	seen := map[string]bool{}
	for _, s := range tfCfg.Statements {
		m := adjustedCountStatement.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("%s: statement %q does not set sampling.adjusted_count from a policy name", transform, s)
			continue
		}
		value, name := m[1], m[2]
		count, ok := want[name]
		if !ok {
			t.Errorf("%s: statement for policy %q, which tail_sampling does not have", transform, name)
			continue
		}
		seen[name] = true
		// Set outright, or multiplied into an upstream count (1 leaves it).
		if value != count && value != `span.attributes["sampling.adjusted_count"] * `+count {
			t.Errorf("%s: policy %s gives %s, want %s (or the upstream count × %s)", transform, name, value, count, count)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s: no adjusted count for policy %s", transform, name)
		}
	}
}

// probabilistic-sampling.yaml: the sampler comes first, in a mode that
// decides on the trace id's W3C randomness and takes spans that were
// sampled before (hash_seed, the default, drops them).
func TestProbabilisticSamplingConfig(t *testing.T) {
	_, c := readCollectorConfig(t, "probabilistic-sampling.yaml")
	if procs := c.Service.Pipelines["traces"].Processors; len(procs) == 0 || procs[0] != "probabilistic_sampler" {
		t.Errorf("the traces pipeline runs %v: want probabilistic_sampler first", procs)
	}
	var ps struct {
		Mode string  `yaml:"mode"`
		Pct  float64 `yaml:"sampling_percentage"`
	}
	c.processor(t, "probabilistic_sampler", &ps)
	if ps.Mode != "proportional" && ps.Mode != "equalizing" {
		t.Errorf("probabilistic_sampler mode %q: want proportional or equalizing (hash_seed, the default, drops every span that arrives with a th)", ps.Mode)
	}
	if ps.Pct <= 0 || ps.Pct > 100 {
		t.Errorf("probabilistic_sampler samples %v %%", ps.Pct)
	}
}

// kafka-secure.yaml is merged over kafka.yaml: it holds exporters only,
// each one of kafka.yaml's that its traces pipeline runs (a name of its
// own would be an exporter no pipeline uses, and the brokers would be
// read in plaintext), with TLS and SASL by a mechanism stormradius takes
// too; the account comes from the environment, never written in the
// file.
func TestKafkaSecureConfig(t *testing.T) {
	raw, _ := readCollectorConfig(t, "kafka-secure.yaml")
	var top map[string]yaml.Node
	if err := yaml.Unmarshal([]byte(raw), &top); err != nil {
		t.Fatal(err)
	}
	for k := range top {
		if k != "exporters" {
			t.Errorf("kafka-secure.yaml sets %s: it is merged over kafka.yaml and should set the exporters' security only", k)
		}
	}
	var base struct {
		Exporters map[string]yaml.Node `yaml:"exporters"`
		Service   struct {
			Pipelines map[string]struct {
				Exporters []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	baseText, _ := readCollectorConfig(t, "kafka.yaml")
	if err := yaml.Unmarshal([]byte(collectorVar.ReplaceAllString(baseText, "$2")), &base); err != nil {
		t.Fatal(err)
	}
	type secured struct {
		TLS *struct {
			CAFile string `yaml:"ca_file"`
		} `yaml:"tls"`
		Auth struct {
			SASL *struct {
				Mechanism, Username, Password string
			} `yaml:"sasl"`
		} `yaml:"auth"`
	}
	var rawSec, sec struct {
		Exporters map[string]secured `yaml:"exporters"`
	}
	if err := yaml.Unmarshal([]byte(raw), &rawSec); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(collectorVar.ReplaceAllString(raw, "$2")), &sec); err != nil {
		t.Fatal(err)
	}
	if len(sec.Exporters) == 0 {
		t.Fatal("kafka-secure.yaml configures no exporter")
	}
	for name, e := range sec.Exporters {
		if _, ok := base.Exporters[name]; !ok || !slices.Contains(base.Service.Pipelines["traces"].Exporters, name) {
			t.Errorf("kafka-secure.yaml secures exporter %s, which kafka.yaml's traces pipeline does not run", name)
		}
		if e.TLS == nil {
			t.Errorf("exporter %s: no tls", name)
		}
		if e.Auth.SASL == nil {
			t.Errorf("exporter %s: no auth.sasl", name)
			continue
		}
		if m := e.Auth.SASL.Mechanism; !slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, m) {
			t.Errorf("exporter %s: SASL mechanism %q by default, want one stormradius' --kafka-sasl-mechanism takes", name, m)
		}
		r := rawSec.Exporters[name].Auth.SASL
		for what, v := range map[string]string{"username": r.Username, "password": r.Password} {
			if !collectorVar.MatchString(v) || collectorVar.FindString(v) != v {
				t.Errorf("exporter %s: SASL %s %q, want it from the environment (${env:…})", name, what, v)
			}
		}
		if sm := collectorVar.FindStringSubmatch(r.Password); sm != nil && sm[2] != "" {
			t.Errorf("exporter %s: the SASL password has a default in the file", name)
		}
	}
}
