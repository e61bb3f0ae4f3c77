package collector

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"

	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stormradius/stormradius/e2e/e2ekit"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every compression each exporter offers for the route (configcompression;
// the gRPC exporter takes gzip, zstd and snappy, HTTP also deflate).
var (
	grpcCompressions = []string{"none", "gzip", "zstd", "snappy"}
	httpCompressions = []string{"none", "gzip", "zstd", "snappy", "x-snappy-framed", "deflate", "zlib", "lz4"}
)

// forStores runs f as a parallel subtest per store (the ClickHouse one is
// skipped, saying why, without STORMRADIUS_CLICKHOUSE).
func forStores(t *testing.T, f func(t *testing.T, st store)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			if st.name == clickhouse.name && os.Getenv(e2ekit.ClickHouseEnv) == "" {
				t.Skip("set STORMRADIUS_CLICKHOUSE=clickhouse://127.0.0.1:9000/default to run the ClickHouse variants")
			}
			f(t, st)
		})
	}
}

// The collector's otlp_grpc exporter, deploy/collector/otlp_grpc.yaml,
// into `stormradius serve`, with each compression (through a wiretap that
// checks each request's grpc-encoding).
func TestOTLPGRPC(t *testing.T) {
	t.Parallel()
	setup(t)
	forStores(t, func(t *testing.T, st store) {
		for _, comp := range grpcCompressions {
			t.Run(comp, func(t *testing.T) {
				t.Parallel()
				svc := startServe(t, st)
				tap := startWiretap(t, svc.grpc, true)
				col := startCollector(t, "otlp_grpc", []string{
					"STORMRADIUS_ENDPOINT=" + tap.addr,
					"STORMRADIUS_COMPRESSION=" + comp,
					"STORMRADIUS_TOKEN=" + ingestToken,
					"STORMRADIUS_TLS_INSECURE=true",
				})
				col.send(t)
				checkReport(t, svc, col.Proc)
				tap.check(t, comp)
			})
		}
	})
}

// The collector's otlp_http exporter, deploy/collector/otlp_http.yaml,
// into `stormradius serve`, with each compression (through a wiretap that
// checks each request's Content-Encoding).
func TestOTLPHTTP(t *testing.T) {
	t.Parallel()
	setup(t)
	forStores(t, func(t *testing.T, st store) {
		for _, comp := range httpCompressions {
			t.Run(comp, func(t *testing.T) {
				t.Parallel()
				svc := startServe(t, st)
				tap := startWiretap(t, svc.otlpHTTP, false)
				col := startCollector(t, "otlp_http", []string{
					"STORMRADIUS_ENDPOINT=http://" + tap.addr,
					"STORMRADIUS_COMPRESSION=" + comp,
					"STORMRADIUS_TOKEN=" + ingestToken,
				})
				col.send(t)
				checkReport(t, svc, col.Proc)
				tap.check(t, comp)
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
					seen := watchProduce(cluster)
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
					checkReport(t, svc, col.Proc)
					seen.check(t, comp)
				})
			}
		}
	})
}

// Record batch codecs (the low three bits of a batch's attributes).
var kafkaCodecs = map[string]int{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// produced is what the collector's produce requests carried, read from
// each record batch's header: so that a setting the exporter ignored
// cannot pass unseen.
type produced struct {
	mu         sync.Mutex
	codecs     map[int]int // batches per codec
	records    int
	partitions map[int32]bool
	bad        error
}

// watchProduce observes every produce request the broker handles (the
// broker still handles them).
func watchProduce(c *kfake.Cluster) *produced {
	p := &produced{codecs: map[int]int{}, partitions: map[int32]bool{}}
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, tp := range req.Topics {
			for _, pp := range tp.Partitions {
				p.partitions[pp.Partition] = true
				// v2 record batches, back to back: baseOffset int64,
				// batchLength int32, partitionLeaderEpoch int32, magic
				// int8, crc int32, attributes int16 (offset 21), ...,
				// records count int32 (offset 57).
				for b := pp.Records; len(b) > 0; {
					if len(b) < 61 || b[16] != 2 {
						p.bad = fmt.Errorf("partition %d: not a v2 record batch (%d bytes left)", pp.Partition, len(b))
						break
					}
					n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
					if n > len(b) {
						p.bad = fmt.Errorf("partition %d: record batch of %d bytes, %d sent", pp.Partition, n, len(b))
						break
					}
					p.codecs[int(binary.BigEndian.Uint16(b[21:23])&7)]++
					p.records += int(binary.BigEndian.Uint32(b[57:61]))
					b = b[n:]
				}
			}
		}
		return nil, nil, false
	})
	return p
}

// check asserts that every record batch was compressed with comp and
// that the records were keyed by trace id: partition_traces_by_id makes
// one record per trace of each export (at least one per trace of the
// sample) where the exporter otherwise writes one per export.
func (p *produced) check(t *testing.T, comp string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bad != nil {
		t.Error(p.bad)
	}
	want := kafkaCodecs[comp]
	for codec, n := range p.codecs {
		if codec != want {
			t.Errorf("%d record batches with codec %d, want codec %d (%s) only", n, codec, want, comp)
		}
	}
	if p.codecs[want] == 0 {
		t.Errorf("no record batch with codec %d (%s)", want, comp)
	}
	if p.records < suite.traces {
		t.Errorf("%d records produced, want one per trace at least (%d): partition_traces_by_id", p.records, suite.traces)
	}
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
				if err := col.Stop(30 * time.Second); err != nil {
					t.Fatalf("the collector did not stop cleanly: %v", err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() == 0 {
					t.Fatalf("the file exporter wrote nothing to %s", path)
				}
				checkFileStart(t, path, format, comp)
				out, err := e2ekit.Run(suite.stormradius, "analyze", "--format", "json", path)
				if err != nil {
					t.Fatalf("%s (%d bytes): %v", name, fi.Size(), err)
				}
				compareDocs(t, "stormradius analyze "+name, out)
			})
		}
	}
}

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// checkFileStart asserts that the file begins as the file exporter writes
// format with comp, so that a setting the config failed to apply cannot
// pass as tested: JSON lines start with '{'; proto and per-batch zstd
// with a 4-byte big-endian length, then a message (field 1,
// resource_spans: 0x0a) or a zstd frame; the native stream with a zstd
// frame.
func checkFileStart(t *testing.T, path, format, comp string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head := b[:min(len(b), 8)]
	var ok bool
	switch {
	case comp == "zstd-native":
		ok = bytes.HasPrefix(b, zstdMagic)
	case len(b) < 8:
	case comp == "zstd":
		ok = bytes.HasPrefix(b[4:], zstdMagic) && int(binary.BigEndian.Uint32(b)) <= len(b)-4
	case format == "proto":
		ok = b[4] == 0x0a && int(binary.BigEndian.Uint32(b)) <= len(b)-4
	default:
		ok = b[0] == '{'
	}
	if !ok {
		t.Errorf("%s starts % x: not %s with compression %s as the file exporter writes it", filepath.Base(path), head, format, comp)
	}
}

// The shipped configs' TLS settings: serve with --tls-cert/--tls-key, the
// collector trusting its CA through STORMRADIUS_CA_FILE (gRPC with
// insecure false, HTTP with an https:// endpoint); and with mutual TLS,
// serve requiring a client certificate (--otlp-tls-client-ca), the
// collector presenting one (STORMRADIUS_CLIENT_CERT_FILE, _KEY_FILE).
func TestOTLPTLS(t *testing.T) {
	t.Parallel()
	setup(t)
	for _, route := range []string{"otlp_grpc", "otlp_http"} {
		for _, mutual := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mutual=%v", route, mutual), func(t *testing.T) {
				t.Parallel()
				cert, key := selfSigned(t)
				args := []string{"--tls-cert", cert, "--tls-key", key}
				env := []string{"STORMRADIUS_COMPRESSION=gzip", "STORMRADIUS_TOKEN=" + ingestToken, "STORMRADIUS_CA_FILE=" + cert}
				if mutual {
					// The collector's own certificate, its own CA: serve trusts it alone.
					ccert, ckey := selfSigned(t)
					args = append(args, "--otlp-tls-client-ca", ccert)
					env = append(env, "STORMRADIUS_CLIENT_CERT_FILE="+ccert, "STORMRADIUS_CLIENT_KEY_FILE="+ckey)
				}
				svc := startServe(t, embedded, args...)
				if route == "otlp_grpc" {
					env = append(env, "STORMRADIUS_ENDPOINT="+svc.grpc, "STORMRADIUS_TLS_INSECURE=false")
				} else {
					env = append(env, "STORMRADIUS_ENDPOINT=https://"+svc.otlpHTTP)
				}
				col := startCollector(t, route, env)
				col.send(t)
				checkReport(t, svc, col.Proc)
			})
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// (PEM files) and returns their paths; the certificate is its own CA, for
// a server or a client.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "stormradius e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
