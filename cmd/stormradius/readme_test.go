package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// The README's Kafka setup as written: the serve command it shows reads
// what the kafka exporter writes in each encoding the README offers —
// otlp_json included, with no --kafka-encoding (JSON records are
// detected) — and the report equals analyze.
func TestREADMEKafka(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	encLine := regexp.MustCompile(`(?m)^\s+encoding: (otlp_proto)\s+# or (otlp_json)(.*)$`).FindStringSubmatch(readme)
	if encLine == nil {
		t.Fatal("the README's kafka exporter offers no otlp_proto / otlp_json encoding")
	}
	if strings.Contains(encLine[3], "--kafka-encoding") {
		t.Errorf("the README asks for --kafka-encoding with otlp_json, which is detected:%s", encLine[3])
	}
	cmdLine := regexp.MustCompile(`(?m)^stormradius serve (--kafka-brokers kafka:9092 .*)$`).FindStringSubmatch(readme)
	if cmdLine == nil {
		t.Fatal("the README shows no serve command for Kafka")
	}
	res := crashCorpus(t)
	want := reference(t, res)
	for _, enc := range encLine[1:3] {
		t.Run(enc, func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "otlp_spans"))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("otlp_spans"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, td := range res.Exports(6, 3, 0) {
				req := ptraceotlp.NewExportRequestFromTraces(td)
				var v []byte
				if enc == "otlp_json" {
					v, err = req.MarshalJSON()
				} else {
					v, err = req.MarshalProto()
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			args := strings.Fields(strings.ReplaceAll(cmdLine[1], "kafka:9092", strings.Join(cluster.ListenAddrs(), ",")))
			dir := t.TempDir()
			p := serve(t, dir, args...)
			defer p.term(t)
			if got := settledReport(t, dir, res.Stats.Spans); got != want {
				t.Errorf("report of %s records differs from analyze:\n got %s\nwant %s", enc, got, want)
			}
		})
	}
}
