package collector

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Every compression each exporter offers for the route (configcompression;
// the gRPC exporter takes gzip, zstd and snappy, HTTP also deflate).
var (
	grpcCompressions = []string{"none", "gzip", "zstd", "snappy"}
	httpCompressions = []string{"none", "gzip", "zstd", "snappy", "deflate"}
)

// forStores runs f as a parallel subtest per store (the ClickHouse one is
// skipped, saying why, without STORMRADIUS_CLICKHOUSE).
func forStores(t *testing.T, f func(t *testing.T, st store)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			if st.name == clickhouse.name && os.Getenv(clickHouseEnv) == "" {
				t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the ClickHouse variants")
			}
			f(t, st)
		})
	}
}

// The collector's otlp_grpc exporter, deploy/collector/otlp_grpc.yaml,
// into `stormradius serve`, with each compression.
func TestOTLPGRPC(t *testing.T) {
	t.Parallel()
	setup(t)
	forStores(t, func(t *testing.T, st store) {
		for _, comp := range grpcCompressions {
			t.Run(comp, func(t *testing.T) {
				t.Parallel()
				svc := startServe(t, st)
				col := startCollector(t, "otlp_grpc", []string{
					"STORMRADIUS_ENDPOINT=" + svc.grpc,
					"STORMRADIUS_COMPRESSION=" + comp,
					"STORMRADIUS_TOKEN=" + ingestToken,
					"STORMRADIUS_TLS_INSECURE=true",
				})
				col.send(t)
				checkReport(t, svc, col.proc)
			})
		}
	})
}

// The collector's otlp_http exporter, deploy/collector/otlp_http.yaml,
// into `stormradius serve`, with each compression.
func TestOTLPHTTP(t *testing.T) {
	t.Parallel()
	setup(t)
	forStores(t, func(t *testing.T, st store) {
		for _, comp := range httpCompressions {
			t.Run(comp, func(t *testing.T) {
				t.Parallel()
				svc := startServe(t, st)
				col := startCollector(t, "otlp_http", []string{
					"STORMRADIUS_ENDPOINT=http://" + svc.otlpHTTP,
					"STORMRADIUS_COMPRESSION=" + comp,
					"STORMRADIUS_TOKEN=" + ingestToken,
				})
				col.send(t)
				checkReport(t, svc, col.proc)
			})
		}
	})
}

// The collector's kafka exporter, deploy/collector/kafka.yaml, into a
// Kafka-protocol broker (kfake, in this process, on a loopback port; three
// partitions, records keyed by trace id), consumed by `stormradius serve
// --kafka-brokers` on the embedded store and by cmd/ingest on ClickHouse,
// with each encoding and producer compression.
func TestKafka(t *testing.T) {
	t.Parallel()
	setup(t)
	const topic = "otlp_spans"
	forStores(t, func(t *testing.T, st store) {
		for _, enc := range []string{"otlp_proto", "otlp_json"} {
			for _, comp := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
				t.Run(enc+"/"+comp, func(t *testing.T) {
					t.Parallel()
					cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(cluster.Close)
					broker := cluster.ListenAddrs()[0]
					kafka := []string{"--kafka-brokers", broker, "--kafka-topic", topic,
						"--kafka-group", "stormradius-e2e", "--kafka-encoding", enc}
					var svc *service
					if st.name == embedded.name {
						svc = startServe(t, st, kafka...)
					} else {
						svc = startService(t, st, suite.ingest, kafka...)
					}
					col := startCollector(t, "kafka", []string{
						"KAFKA_BROKERS=" + broker,
						"KAFKA_TOPIC=" + topic,
						"KAFKA_ENCODING=" + enc,
						"KAFKA_COMPRESSION=" + comp,
					})
					col.send(t)
					checkReport(t, svc, col.proc)
				})
			}
		}
	})
}

// The collector's file exporter, deploy/collector/file.yaml, in each
// format and compression (zstd per batch, and zstd as one standard stream
// under the exporter.file.nativeCompression feature gate); `stormradius
// analyze` of the file it wrote must equal analyze of the sample.
func TestFile(t *testing.T) {
	t.Parallel()
	setup(t)
	for _, format := range []string{"json", "proto"} {
		for _, comp := range []string{"none", "zstd", "zstd-native"} {
			t.Run(format+"/"+comp, func(t *testing.T) {
				t.Parallel()
				name := map[string]string{"json": "traces.jsonl", "proto": "traces.pb"}[format]
				env := []string{"FILE_FORMAT=" + format, "FILE_COMPRESSION="}
				var args []string
				if comp != "none" {
					name += ".zst"
					env[1] += "zstd"
				}
				if comp == "zstd-native" {
					args = append(args, "--feature-gates=exporter.file.nativeCompression")
				}
				path := filepath.Join(t.TempDir(), name)
				col := startCollector(t, "file", append(env, "TRACES_FILE="+path), args...)
				col.send(t)
				// SIGTERM: the collector flushes its batches and closes the file.
				if err := col.stop(30 * time.Second); err != nil {
					t.Fatalf("the collector did not stop cleanly: %v", err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() == 0 {
					t.Fatalf("the file exporter wrote nothing to %s", path)
				}
				var stdout, stderr bytes.Buffer
				cmd := exec.Command(suite.stormradius, "analyze", "--format", "json", path)
				cmd.Env = baseEnv()
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("stormradius analyze %s (%d bytes): %v\n%s", name, fi.Size(), err, stderr.Bytes())
				}
				compareDocs(t, "stormradius analyze "+name, stdout.Bytes())
			})
		}
	}
}
