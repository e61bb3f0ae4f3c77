// Command gen writes the trace files of ingest/testdata/fileexporter: it
// runs the OpenTelemetry Collector's file exporter (collector-contrib
// exporter/fileexporter v0.165.0, the real component, configured from the
// same keys as a collector's YAML) with each of its format/compression
// configurations on a deterministic set of traces from stormradius's sim
// package, and writes input.jsonl.gz, the same requests as OTLP JSON lines
// written with pdata, as the reference. It is a module of its own, so that
// the stormradius module does not depend on the collector:
//
//	cd ingest/testdata/fileexporter/gen && go run . -out ..
//	cd .. && zstd -q -19 -c json.jsonl > zstd-cli.jsonl.zst && pzstd -q -p 2 -c proto.binpb > pzstd-cli.binpb.zst
package main

import (
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormradius/stormradius/sim"
)

type run struct {
	name   string // output path, relative to -out; may contain * with group_by
	native bool   // feature gate exporter.file.nativeCompression
	conf   map[string]any
	pause  time.Duration // sleep between exports (to let flush_interval cut frames)
}

func main() {
	out := flag.String("out", "out", "output directory")
	flag.Parse()
	reqs := traces()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	// The independent reference: every request as one OTLP JSON line,
	// written here with pdata, gzipped.
	writeReference(filepath.Join(*out, "input.jsonl.gz"), reqs)

	runs := []run{
		{name: "json.jsonl", conf: map[string]any{"format": "json"}},
		{name: "proto.binpb", conf: map[string]any{"format": "proto"}},
		{name: "json-zstd.bin", conf: map[string]any{"format": "json", "compression": "zstd"}},
		{name: "proto-zstd.bin", conf: map[string]any{"format": "proto", "compression": "zstd"}},
		{name: "native-json-zstd.jsonl.zst", native: true, pause: 30 * time.Millisecond,
			conf: map[string]any{"format": "json", "compression": "zstd", "flush_interval": "10ms"}},
		{name: "native-proto-zstd.binpb.zst", native: true,
			conf: map[string]any{"format": "proto", "compression": "zstd", "compression_params": map[string]any{"level": 11}}},
		{name: "native-json-zstd-rotation.jsonl.zst", native: true,
			conf: map[string]any{"format": "json", "compression": "zstd", "rotation": map[string]any{"max_megabytes": 10}}},
		{name: "native-proto-zstd-rotation.binpb.zst", native: true,
			conf: map[string]any{"format": "proto", "compression": "zstd", "rotation": map[string]any{"max_megabytes": 10}}},
		{name: "groupby/*.bin", conf: map[string]any{"format": "proto", "compression": "zstd",
			"group_by": map[string]any{"enabled": true, "resource_attribute": "service.name"}}},
	}
	for _, r := range runs {
		if err := export(filepath.Join(*out, r.name), r, reqs); err != nil {
			log.Fatalf("%s: %v", r.name, err)
		}
		log.Printf("wrote %s", r.name)
	}
}

// traces is a small HotROD-like mesh during an incident, exported as a
// mesh of SDKs exports it: traces in pieces, several per request.
func traces() []ptrace.Traces {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true, Placement: sim.ClaimHeader}
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 2}
	svcs := []sim.Service{
		{Name: "frontend", Version: "2.3.0", Operation: "GET /dispatch", Policy: own, Calls: []sim.Edge{{To: "customer"}, {To: "route"}}},
		{Name: "customer", Version: "1.4.1", Operation: "GET /customer", Policy: naive, Calls: []sim.Edge{{To: "mysql", Virtual: true, NameAttr: "db.system.name"}}},
		{Name: "route", Version: "1.0.0", Operation: "GET /route", Policy: naive, Calls: []sim.Edge{{To: "geo"}}},
		{Name: "geo", Version: "3.0.0", Operation: "GET /geo", Policy: naive},
	}
	sc := sim.Scenario{
		Services: svcs, Root: "frontend", Traces: 24, Seed: 20260101, Spacing: 2 * time.Second,
		Faults: []sim.Fault{{Service: "geo", Rate: 0.6, Persistent: true, FromTrace: 8, ToTrace: 18}},
	}
	res, err := sim.Run(sc)
	if err != nil {
		log.Fatal(err)
	}
	return res.Exports(7, 3, 6)
}

func writeReference(path string, reqs []ptrace.Traces) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	for _, td := range reqs {
		if err := sim.WriteJSONLine(zw, td); err != nil {
			log.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

func export(path string, r run, reqs []ptrace.Traces) error {
	if err := featuregate.GlobalRegistry().Set("exporter.file.nativeCompression", r.native); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	m := map[string]any{"path": path}
	for k, v := range r.conf {
		m[k] = v
	}
	f := fileexporter.NewFactory()
	cfg := f.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(m).Unmarshal(cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := cfg.(interface{ Validate() error }).Validate(); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	ctx := context.Background()
	exp, err := f.CreateTraces(ctx, exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		return err
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		return err
	}
	for _, td := range reqs {
		if err := exp.ConsumeTraces(ctx, td); err != nil {
			return err
		}
		time.Sleep(r.pause)
	}
	return exp.Shutdown(ctx)
}
