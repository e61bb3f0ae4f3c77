package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/sim"
)

// appendRequestPdata is the protobuf path through pdata's object model,
// the reference the wire decoder is compared with: pdata's ExportRequest
// unmarshal (which, as every OTLP receiver, migrates the deprecated
// instrumentation_library_spans), then AppendTraces.
func appendRequestPdata(d *Decoder, dst []graph.Span, b []byte) ([]graph.Span, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		return dst, err
	}
	return d.AppendTraces(dst, req.Traces()), nil
}

// diffProto decodes b with the wire decoder and with pdata, and fails the
// test unless both reject it or both give the same spans. It returns the
// wire decoder's result.
func diffProto(t testing.TB, cfg DecoderConfig, b []byte) ([]graph.Span, error) {
	t.Helper()
	ref, rerr := appendRequestPdata(NewDecoder(cfg), nil, b)
	kept := []graph.Span{{Name: "kept"}}
	got, err := NewDecoder(cfg).appendProto(kept, b)
	return diffDecoded(t, "wire decoder", b, kept, got, err, ref, rerr)
}

// diffDecoded fails the test unless the decoder (name; its spans got
// appended to kept, or err) and pdata's path (ref, or rerr) both reject b
// or give the same spans, and the decoder kept dst (and left it as it was
// on an error). It returns the decoder's spans.
func diffDecoded(t testing.TB, name string, b []byte, kept, got []graph.Span, err error, ref []graph.Span, rerr error) ([]graph.Span, error) {
	t.Helper()
	if (err == nil) != (rerr == nil) {
		t.Fatalf("%s error %v, pdata error %v (input %d bytes: %q)", name, err, rerr, len(b), trimmed(b))
	}
	if len(got) == 0 || got[0].Name != "kept" {
		t.Fatalf("dst not kept: %+v", got)
	}
	if err != nil {
		if len(got) != 1 || &got[0] != &kept[0] {
			t.Fatalf("dst changed on error %v: %d spans", err, len(got))
		}
		return nil, err
	}
	got = got[1:]
	if len(got) != len(ref) {
		t.Fatalf("%s: %d spans, pdata: %d (input %q)", name, len(got), len(ref), trimmed(b))
	}
	for i := range got {
		if got[i] != ref[i] {
			t.Fatalf("span %d differs (input %q):\n%s %+v\npdata %+v", i, trimmed(b), name, got[i], ref[i])
		}
	}
	return got, nil
}

func trimmed(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// pb builds protobuf messages by hand, to put on the wire what no
// marshaller writes.
type pb []byte

func (p pb) bytes(f protowire.Number, v []byte) pb {
	return protowire.AppendBytes(protowire.AppendTag(p, f, protowire.BytesType), v)
}
func (p pb) str(f protowire.Number, s string) pb { return p.bytes(f, []byte(s)) }
func (p pb) msg(f protowire.Number, m pb) pb     { return p.bytes(f, m) }
func (p pb) varint(f protowire.Number, v uint64) pb {
	return protowire.AppendVarint(protowire.AppendTag(p, f, protowire.VarintType), v)
}
func (p pb) fixed64(f protowire.Number, v uint64) pb {
	return protowire.AppendFixed64(protowire.AppendTag(p, f, protowire.Fixed64Type), v)
}
func (p pb) fixed32(f protowire.Number, v uint32) pb {
	return protowire.AppendFixed32(protowire.AppendTag(p, f, protowire.Fixed32Type), v)
}
func (p pb) raw(b ...byte) pb { return append(p, b...) }

// Attribute values and key-values.
func sval(s string) pb  { return pb{}.str(1, s) }
func bval(b bool) pb    { return pb{}.varint(2, map[bool]uint64{true: 1}[b]) }
func ival(i int64) pb   { return pb{}.varint(3, uint64(i)) }
func dval(f float64) pb { return pb{}.fixed64(4, math.Float64bits(f)) }
func aval(vs ...pb) pb {
	var a pb
	for _, v := range vs {
		a = a.msg(1, v)
	}
	return pb{}.msg(5, a)
}
func kvlval(kvs ...pb) pb {
	var l pb
	for _, kv := range kvs {
		l = l.msg(1, kv)
	}
	return pb{}.msg(6, l)
}
func kv(k string, v pb) pb { return pb{}.str(1, k).msg(2, v) }

// spanOf is a span with ids, kind, name, times and attributes.
func spanOf(kind uint64, name string, attrs ...pb) pb {
	s := pb{}.bytes(1, []byte("0123456789abcdef")).bytes(2, []byte("spanid01")).
		varint(6, kind).str(5, name).fixed64(7, 1_700_000_000_000_000_000).fixed64(8, 1_700_000_000_100_000_000)
	for _, a := range attrs {
		s = s.msg(9, a)
	}
	return s
}

func resourceOf(attrs ...pb) pb {
	var r pb
	for _, a := range attrs {
		r = r.msg(1, a)
	}
	return r
}

// requestOf is one resource with one scope holding spans.
func requestOf(res pb, spans ...pb) []byte {
	var ss pb
	for _, s := range spans {
		ss = ss.msg(2, s)
	}
	return pb{}.msg(1, pb{}.msg(1, res).msg(2, ss))
}

// nestedArrays is an attribute value of levels arrays, one in another,
// around a string: pdata decodes the string at depth 2·levels+1.
func nestedArrays(levels int) pb { return wrapArrays(sval("x"), levels) }

func wrapArrays(v pb, levels int) pb {
	for range levels {
		v = aval(v)
	}
	return v
}

func nestedKvlists(levels int) pb {
	v := sval("x")
	for range levels {
		v = kvlval(kv("k", v))
	}
	return v
}

// protoEdgeCases are hand-built requests, valid and not: each has at most
// one defect, so that the kind of error can be checked too.
func protoEdgeCases() []struct {
	name string
	b    []byte
} {
	svc := resourceOf(kv("service.name", sval("svc")), kv("service.version", sval("v1")))
	one := func(attrs ...pb) []byte { return requestOf(svc, spanOf(2, "op", attrs...)) }
	client := func(attrs ...pb) []byte { return requestOf(svc, spanOf(3, "call", attrs...)) }
	hdr := "http.response.header.x-error-claim"
	long := strings.Repeat("n", 2000)
	big := strings.Repeat("v", 1<<20)
	good := spanOf(2, "op")
	type tc = struct {
		name string
		b    []byte
	}
	cases := []tc{
		{"nil", nil},
		{"empty", []byte{}},
		{"empty resource_spans", pb{}.msg(1, nil)},
		{"empty scope_spans", pb{}.msg(1, pb{}.msg(2, nil))},
		{"empty span", requestOf(nil, nil)},
		{"empty resource", requestOf(pb{}, good)},
		{"no service.name", requestOf(resourceOf(kv("service.version", sval("v"))), good)},
		{"service.name empty", requestOf(resourceOf(kv("service.name", sval(""))), good)},
		{"service.name int", requestOf(resourceOf(kv("service.name", ival(3))), good)},
		{"two service.names", requestOf(resourceOf(kv("service.name", sval("a")), kv("service.name", sval("b")), kv("service.name", sval(""))), good)},
		{"two service.versions", requestOf(resourceOf(kv("service.version", sval("a")), kv("service.version", sval("")), kv("service.version", ival(1))), good)},
		{"resource in pieces", pb{}.msg(1, pb{}.msg(1, resourceOf(kv("service.name", sval("a")))).msg(2, pb{}.msg(2, good)).msg(1, resourceOf(kv("service.version", sval("v9")))))},
		{"resource after spans", pb{}.msg(1, pb{}.msg(2, pb{}.msg(2, good)).msg(1, svc))},
		{"resource dropped count, entity refs", pb{}.msg(1, pb{}.msg(1, svc.varint(2, 3).msg(3, pb{}.str(1, "s").str(2, "t").str(3, "a").str(3, "b").str(4, "d").varint(9, 1))).msg(2, pb{}.msg(2, good)))},
		{"two resource_spans", append(requestOf(svc, good), requestOf(resourceOf(kv("service.name", sval("other"))), spanOf(3, "x"))...)},
		{"scope and schema urls", pb{}.msg(1, pb{}.msg(1, svc).str(3, "https://schema").msg(2, pb{}.msg(1, pb{}.str(1, "lib").str(2, "1.0").msg(3, kv("a", sval("b"))).varint(4, 2)).msg(2, good).str(3, "u")))},
		{"deprecated spans only", pb{}.msg(1, pb{}.msg(1, svc).msg(1000, pb{}.msg(2, spanOf(2, "old"))))},
		{"deprecated spans beside scope_spans", pb{}.msg(1, pb{}.msg(1, svc).msg(1000, pb{}.msg(2, spanOf(2, "old"))).msg(2, pb{}.msg(2, good)))},
		{"deprecated spans after an empty scope_spans", pb{}.msg(1, pb{}.msg(1000, pb{}.msg(2, spanOf(2, "old"))).msg(2, nil))},
		{"malformed deprecated spans beside scope_spans", pb{}.msg(1, pb{}.msg(2, pb{}.msg(2, good)).msg(1000, pb{}.msg(2, pb{}.bytes(1, []byte("short")))))},
		{"long names", requestOf(resourceOf(kv("service.name", sval(long))), spanOf(2, long, kv("http.request.method", sval(long)), kv("http.route", sval("/"+long))))},
		{"long peer", client(kv("server.address", sval(long)))},
		{"huge attribute value", one(kv("url.full", sval(big)), kv("other", sval(big)))},
		{"non-UTF-8", requestOf(resourceOf(kv("service.name", sval("\xff\xfe"))), spanOf(2, "\xc3\x28", kv("http.request.method", sval("G\xe9T")), kv("http.route", sval("/\x80"))))},
		{"non-UTF-8 key", one(kv("error.\xffclaim", sval("claimed")))},
		{"duplicate attributes", one(kv("http.response.status_code", ival(503)), kv("http.response.status_code", ival(200)))},
		{"duplicate attributes, first not a number", one(kv("http.response.status_code", sval("x")), kv("http.response.status_code", ival(503)))},
		{"value before key", one(pb{}.msg(2, ival(503)).str(1, "http.response.status_code"))},
		{"two keys", one(pb{}.str(1, "x").str(1, "http.response.status_code").msg(2, ival(503)))},
		{"two values", one(pb{}.str(1, "http.response.status_code").msg(2, ival(503)).msg(2, sval("504")))},
		{"two values, second empty", one(pb{}.str(1, "http.response.status_code").msg(2, ival(503)).msg(2, nil))},
		{"two value fields in one value", one(kv("http.response.status_code", ival(503).str(1, "200")))},
		{"key only", one(pb{}.str(1, "error.claim"))},
		{"value only", one(pb{}.msg(2, sval("claimed")))},
		{"key_strindex", one(pb{}.str(1, "error.claim").varint(3, 7).msg(2, sval("claimed")))},
		{"string_value_strindex claim", one(kv("error.claim", pb{}.varint(8, 3)))},
		{"string_value_strindex after string", one(kv("error.claim", sval("claimed").varint(8, 3)))},
		{"string then strindex in two values", one(pb{}.str(1, "error.claim").msg(2, sval("claimed")).msg(2, pb{}.varint(8, 1)))},
		{"bytes claim", one(kv("error.claim", pb{}.bytes(7, []byte("claimed"))))},
		{"map claim", one(kv("error.claim", kvlval(kv("a", sval("b")))))},
		{"empty value claim", one(kv("error.claim", nil))},
		{"claim header array", one(kv(hdr, aval(sval("Unclaimed"), sval("claimed"))))},
		{"claim header empty array", one(kv(hdr, aval()), kv("rpc.response.metadata.x-error-claim", sval("claimed")))},
		{"claim header array of int", one(kv(hdr, aval(ival(1))))},
		{"claim header array, first empty", one(kv(hdr, aval(nil, sval("claimed"))))},
		{"claim header array replaced", one(kv(hdr, aval(sval("claimed")).raw(aval(ival(2))...)))},
		{"claim header underscores", one(kv("http.response.header.X_Error_Claim", sval(" CLAIM ")))},
		{"claim metadata", client(kv("rpc.response.metadata.x-error-claim", aval(sval("unclaim"))))},
		{"claim invalid", one(kv("error.claim", sval("maybe")))},
		{"http status string", one(kv("http.response.status_code", sval(" 503.0 ")))},
		{"http status double", one(kv("http.response.status_code", dval(502.9)))},
		{"http status NaN", one(kv("http.response.status_code", dval(math.NaN())), kv("rpc.grpc.status_code", ival(14)))},
		{"http status huge double", one(kv("http.response.status_code", dval(1e300)))},
		{"http status huge int", one(kv("http.response.status_code", ival(math.MaxInt64)))},
		{"http status below 100", one(kv("http.response.status_code", ival(0)), kv("http.status_code", ival(404)))},
		{"old http status", one(kv("http.status_code", sval("500")))},
		{"grpc status name", one(kv("rpc.response.status_code", sval(" deadline_exceeded ")))},
		{"grpc status canceled", client(kv("rpc.response.status_code", sval("CANCELED")))},
		{"grpc status out of range", one(kv("rpc.grpc.status_code", ival(17)), kv("rpc.response.status_code", ival(13)))},
		{"grpc status negative", one(kv("rpc.grpc.status_code", ival(-1)))},
		{"operation http", one(kv("http.request.method", sval("POST")), kv("http.route", sval("/x")))},
		{"operation old method", one(kv("http.method", sval("GET")), kv("http.route", sval("/y")))},
		{"operation empty method", one(kv("http.request.method", sval("")), kv("http.method", sval("PUT")), kv("http.route", sval("/z")))},
		{"operation rpc", one(kv("rpc.service", sval("p.S")), kv("rpc.method", sval("M")))},
		{"operation rpc full", one(kv("rpc.service", sval("p.S")), kv("rpc.method", sval("q.T/N")))},
		{"operation rpc without service", one(kv("rpc.method", sval("M")))},
		{"operation on a client", client(kv("http.request.method", sval("POST")), kv("http.route", sval("/x")))},
		{"resend", client(kv("http.request.resend_count", ival(2)))},
		{"resend string", client(kv("http.request.resend_count", sval("3")))},
		{"trace_state", requestOf(svc, good.str(3, "congo=x,ot=rv:abcdef01234567;th:c"))},
		{"trace_state twice", requestOf(svc, good.str(3, "ot=th:8").str(3, "ot=th:c"))},
		{"trace_state malformed", requestOf(svc, good.str(3, "ot=th:8;"))},
		{"trace_state wrong wire type", requestOf(svc, good.varint(3, 1))},
		{"trace_state past the end", requestOf(svc, good.raw(0x1a, 0x05, 'o', 't'))},
		{"trace_state non-UTF-8", requestOf(svc, good.str(3, "ot=th:\xff8"))},
		{"adjusted count and trace_state", requestOf(svc, spanOf(2, "op", kv("sampling.adjusted_count", sval(" 12 "))).str(3, "ot=th:8"))},
		{"adjusted count on the resource", requestOf(resourceOf(kv("sampling.adjusted_count", dval(3)), kv("service.name", sval("svc"))), good.str(3, "ot=th:8"))},
		{"adjusted count on the resource twice", requestOf(resourceOf(kv("sampling.adjusted_count", nil), kv("sampling.adjusted_count", ival(5))), good)},
		{"adjusted count on the resource past the limit", requestOf(resourceOf(kv("sampling.adjusted_count", nestedArrays(60))), good)},
		{"jaeger tags", one(kv("sampler.type", sval("probabilistic")), kv("sampler.param", dval(0.001)))},
		{"jaeger tags, param first", one(kv("sampler.param", sval("0.5")), kv("sampler.type", sval("probabilistic")))},
		{"jaeger const", one(kv("sampler.type", sval("const")), kv("sampler.param", bval(true)))},
		{"resend negative, retry.attempt", client(kv("http.request.resend_count", ival(-1)), kv("retry.attempt", dval(2.5)))},
		{"resend huge", client(kv("retry.attempt", ival(1<<40)))},
		{"retry flags", client(kv("retry.criteria_satisfied", bval(true)), kv("retry.suppressed", sval(" True ")), kv("dependency.fail_open", sval("FALSE")))},
		{"retry flags bool varint 2", client(kv("retry.criteria_satisfied", pb{}.varint(2, 2)), kv("dependency.fail_open", ival(1)))},
		{"peer order", client(kv("db.system", sval("redis")), kv("server.address", sval("cache")), kv("peer.service", sval("")), kv("service.peer.name", sval("named")))},
		{"peer db.system.name", client(kv("db.system.name", sval("postgresql")), kv("net.peer.name", sval("n")))},
		{"peer net.peer.name", client(kv("net.peer.name", sval("n")))},
		{"peer url", client(kv("url.full", sval("https://user@[::1]:8443/p?q#f")))},
		{"peer old url", client(kv("url.full", sval("/relative")), kv("http.url", sval("http://h.example:80/")))},
		{"peer envoy", client(kv("upstream_cluster", sval("cfg")), kv("upstream_cluster.name", sval("obs")))},
		{"peer envoy cfg", client(kv("upstream_cluster", sval("cfg")))},
		{"peer not a string", client(kv("server.address", ival(1)), kv("db.system", aval(sval("x"))))},
		{"target", client(kv("db.statement", sval("SELECT 1")), kv("db.query.text", sval("SELECT 2")))},
		{"target empty", client(kv("url.full", sval("")), kv("http.url", sval("http://a/")))},
		{"every kind", requestOf(svc, spanOf(0, "a"), spanOf(1, "b"), spanOf(4, "c"), spanOf(5, "d"), spanOf(6, "e"), spanOf(1<<63, "f"), spanOf(1<<32+2, "g"), spanOf(math.MaxUint64, "h"))},
		{"status error", requestOf(svc, good.msg(15, pb{}.str(2, "boom").varint(3, 2)))},
		{"status error truncated to int32", requestOf(svc, good.msg(15, pb{}.varint(3, 1<<32+2)))},
		{"status in pieces", requestOf(svc, good.msg(15, pb{}.varint(3, 2)).msg(15, pb{}.str(2, "m")))},
		{"status reset", requestOf(svc, good.msg(15, pb{}.varint(3, 2)).msg(15, pb{}.varint(3, 1)))},
		{"times above int64", requestOf(svc, good.fixed64(7, math.MaxUint64).fixed64(8, 1<<63))},
		{"ids repeated", requestOf(svc, good.bytes(1, []byte("fedcba9876543210")).bytes(2, nil).bytes(4, []byte("parent01")).bytes(4, []byte("parent02")))},
		{"ids empty", requestOf(svc, pb{}.bytes(1, nil).bytes(2, nil).bytes(4, nil).str(5, "x"))},
		{"name twice", requestOf(svc, good.str(5, "second"))},
		{"every span field", requestOf(svc, good.str(3, "ts=1").varint(10, 1).msg(11, pb{}.fixed64(1, 5).str(2, "ev").msg(3, kv("a", aval(sval("b")))).varint(4, 1)).varint(12, 2).
			msg(13, pb{}.bytes(1, []byte("0123456789abcdef")).bytes(2, []byte("linkid01")).str(3, "ts").msg(4, kv("l", ival(1))).varint(5, 1).fixed32(6, 1)).varint(14, 3).fixed32(16, 0x301))},
		{"link with empty ids", requestOf(svc, good.msg(13, pb{}.bytes(1, nil).bytes(2, nil)))},
		{"attributes after everything", requestOf(svc, pb{}.str(5, "late").varint(6, 2).msg(9, kv("http.request.method", sval("GET"))).bytes(1, []byte("0123456789abcdef")).msg(9, kv("http.route", sval("/late"))))},
		{"unknown fields everywhere", pb{}.varint(99, 1).msg(1, pb{}.fixed32(50, 1).msg(1, resourceOf(kv("service.name", sval("u").fixed64(40, 1))).fixed64(9, 1)).msg(2, pb{}.varint(77, 5).msg(2, good.str(17, "x").varint(100, 3).fixed64(200, 1).fixed32(300, 2).msg(9, kv("k", sval("v")).varint(9, 1))).raw(0xf8, 0xff, 0xff, 0xff, 0x0f, 1)))},
		{"unknown group", requestOf(svc, good.raw(0x9b, 0x01, 0x08, 0x01, 0x9c, 0x01))},
		{"unknown group with nested group", requestOf(svc, good.raw(0x9b, 0x01, 0xa3, 0x01, 0xa4, 0x01, 0x9c, 0x01))},
		{"unknown empty group", requestOf(svc, good.raw(0x9b, 0x01, 0x9c, 0x01))},
		{"end group alone", requestOf(svc, good.raw(0x9c, 0x01))},
		{"unterminated group", requestOf(svc, good.raw(0x9b, 0x01))},
		{"unknown wire type 6", requestOf(svc, good.raw(0x9e, 0x01, 0x00))},
		{"unknown wire type 7", requestOf(svc, good.raw(0x9f, 0x01, 0x00))},
		{"field number 0", requestOf(svc, good.raw(0x00, 0x00))},
		{"field number 2^32+9 (truncated to 9)", requestOf(svc, good.raw(0xca, 0x80, 0x80, 0x80, 0x80, 0x02, 0x00))},
		{"field number 2^31 (negative as int32)", requestOf(svc, good.raw(0x80, 0x80, 0x80, 0x80, 0x40, 0x00))},
		{"10-byte varint with high bits", requestOf(svc, good.raw(0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f))},
		{"11-byte varint", requestOf(svc, good.raw(0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))},
		{"varint cut", requestOf(svc, good.raw(0x30, 0xff))},
		{"length past the end", requestOf(svc, good.raw(0x2a, 0x05, 'a'))},
		{"huge length", requestOf(svc, good.raw(0x2a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f))},
		{"negative length", requestOf(svc, good.raw(0x2a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))},
		{"fixed64 cut", requestOf(svc, good.raw(0x39, 1, 2, 3))},
		{"fixed32 cut", requestOf(svc, good.raw(0x85, 0x01, 1, 2))},
		{"trace id 15 bytes", requestOf(svc, good.bytes(1, make([]byte, 15)))},
		{"span id 9 bytes", requestOf(svc, good.bytes(2, make([]byte, 9)))},
		{"parent id 16 bytes", requestOf(svc, good.bytes(4, make([]byte, 16)))},
		{"link trace id 8 bytes", requestOf(svc, good.msg(13, pb{}.bytes(1, make([]byte, 8))))},
		{"link span id 16 bytes", requestOf(svc, good.msg(13, pb{}.bytes(2, make([]byte, 16))))},
		{"wrong type: resource_spans", pb{}.varint(1, 1)},
		{"wrong type: resource", pb{}.msg(1, pb{}.varint(1, 1))},
		{"wrong type: scope_spans", pb{}.msg(1, pb{}.fixed64(2, 1))},
		{"wrong type: schema_url", pb{}.msg(1, pb{}.varint(3, 1))},
		{"wrong type: deprecated", pb{}.msg(1, pb{}.varint(1000, 1))},
		{"wrong type: resource attributes", pb{}.msg(1, pb{}.msg(1, pb{}.varint(1, 1)))},
		{"wrong type: dropped count", pb{}.msg(1, pb{}.msg(1, pb{}.str(2, "x")))},
		{"wrong type: entity ref", pb{}.msg(1, pb{}.msg(1, pb{}.varint(3, 1)))},
		{"wrong type: entity ref field", pb{}.msg(1, pb{}.msg(1, pb{}.msg(3, pb{}.varint(3, 1))))},
		{"wrong type: scope", pb{}.msg(1, pb{}.msg(2, pb{}.varint(1, 1)))},
		{"wrong type: scope name", pb{}.msg(1, pb{}.msg(2, pb{}.msg(1, pb{}.varint(1, 1))))},
		{"wrong type: scope dropped", pb{}.msg(1, pb{}.msg(2, pb{}.msg(1, pb{}.str(4, "x"))))},
		{"wrong type: scope attribute value", pb{}.msg(1, pb{}.msg(2, pb{}.msg(1, pb{}.msg(3, pb{}.str(1, "k").msg(2, pb{}.varint(1, 3))))))},
		{"wrong type: span", pb{}.msg(1, pb{}.msg(2, pb{}.varint(2, 1)))},
		{"wrong type: trace_id", requestOf(svc, good.varint(1, 1))},
		{"wrong type: span_id", requestOf(svc, good.varint(2, 1))},
		{"wrong type: trace_state", requestOf(svc, good.varint(3, 1))},
		{"wrong type: parent", requestOf(svc, good.fixed32(4, 1))},
		{"wrong type: name", requestOf(svc, good.varint(5, 1))},
		{"wrong type: kind", requestOf(svc, good.str(6, "x"))},
		{"wrong type: start", requestOf(svc, good.varint(7, 1))},
		{"wrong type: end", requestOf(svc, good.fixed32(8, 1))},
		{"wrong type: attributes", requestOf(svc, good.varint(9, 1))},
		{"wrong type: dropped attributes", requestOf(svc, good.fixed64(10, 1))},
		{"wrong type: events", requestOf(svc, good.varint(11, 1))},
		{"wrong type: dropped events", requestOf(svc, good.str(12, ""))},
		{"wrong type: links", requestOf(svc, good.fixed64(13, 1))},
		{"wrong type: dropped links", requestOf(svc, good.str(14, ""))},
		{"wrong type: status", requestOf(svc, good.varint(15, 1))},
		{"wrong type: flags", requestOf(svc, good.varint(16, 1))},
		{"wrong type: event time", requestOf(svc, good.msg(11, pb{}.varint(1, 1)))},
		{"wrong type: event name", requestOf(svc, good.msg(11, pb{}.varint(2, 1)))},
		{"wrong type: event attribute", requestOf(svc, good.msg(11, pb{}.varint(3, 1)))},
		{"wrong type: event dropped", requestOf(svc, good.msg(11, pb{}.str(4, "")))},
		{"wrong type: link trace id", requestOf(svc, good.msg(13, pb{}.varint(1, 1)))},
		{"wrong type: link attribute", requestOf(svc, good.msg(13, pb{}.varint(4, 1)))},
		{"wrong type: link dropped", requestOf(svc, good.msg(13, pb{}.str(5, "")))},
		{"wrong type: link flags", requestOf(svc, good.msg(13, pb{}.varint(6, 1)))},
		{"wrong type: status message", requestOf(svc, good.msg(15, pb{}.varint(2, 1)))},
		{"wrong type: status code", requestOf(svc, good.msg(15, pb{}.str(3, "")))},
		{"wrong type: key", one(pb{}.varint(1, 1))},
		{"wrong type: value", one(pb{}.str(1, "k").varint(2, 1))},
		{"wrong type: key_strindex", one(pb{}.str(1, "k").str(3, ""))},
		{"wrong type: string_value", one(kv("k", pb{}.varint(1, 1)))},
		{"wrong type: bool_value", one(kv("k", pb{}.str(2, "")))},
		{"wrong type: int_value", one(kv("k", pb{}.fixed64(3, 1)))},
		{"wrong type: double_value", one(kv("k", pb{}.varint(4, 1)))},
		{"wrong type: array_value", one(kv("k", pb{}.varint(5, 1)))},
		{"wrong type: kvlist_value", one(kv("k", pb{}.varint(6, 1)))},
		{"wrong type: bytes_value", one(kv("k", pb{}.varint(7, 1)))},
		{"wrong type: strindex", one(kv("k", pb{}.str(8, "")))},
		{"wrong type: array element", one(kv("k", pb{}.msg(5, pb{}.varint(1, 1))))},
		{"wrong type: kvlist element", one(kv("k", pb{}.msg(6, pb{}.varint(1, 1))))},
		{"wrong type: nested key", one(kv("k", kvlval(pb{}.varint(1, 1))))},
		{"wrong type: nested value", one(kv("k", kvlval(pb{}.str(1, "a").varint(2, 1))))},
		{"wrong type: nested key_strindex", one(kv("k", kvlval(pb{}.str(1, "a").str(3, ""))))},
		{"wrong type: in a slot's array", one(kv(hdr, pb{}.msg(5, pb{}.msg(1, sval("claimed")).msg(1, pb{}.varint(1, 1)))))},
		{"bad double in a slot", one(kv("http.response.status_code", pb{}.raw(0x21, 1, 2)))},
		{"arrays 96 deep", one(kv("k", nestedArrays(48)))},
		{"arrays at the limit", one(kv("k", nestedArrays(49)))},
		{"arrays past the limit", one(kv("k", nestedArrays(50)))},
		{"arrays far past the limit", one(kv("k", nestedArrays(5000)))},
		{"slot arrays past the limit", one(kv(hdr, nestedArrays(50)))},
		{"kvlists at the limit", one(kv("k", nestedKvlists(32)))},
		{"kvlists past the limit", one(kv("k", nestedKvlists(33)))},
		{"empty array at the limit", one(kv("k", wrapArrays(aval(), 48)))},
		{"empty array past the limit", one(kv("k", wrapArrays(aval(), 49)))},
		{"empty value at the limit", one(kv("k", wrapArrays(nil, 49)))},
		{"empty value past the limit", one(kv("k", wrapArrays(nil, 50)))},
		{"scope attribute past the limit", pb{}.msg(1, pb{}.msg(2, pb{}.msg(1, pb{}.msg(3, kv("k", nestedArrays(50))))))},
		{"event attribute past the limit", requestOf(svc, good.msg(11, pb{}.msg(3, kv("k", nestedKvlists(40)))))},
		{"resource attribute past the limit", requestOf(resourceOf(kv("service.name", nestedArrays(60))), good)},
		{"second value past the limit", one(pb{}.str(1, "x").msg(2, sval("a")).msg(2, nestedArrays(50)))},
	}
	// Wrong wire types for every scalar-valued slot, and every slot given
	// as every value type.
	types := []pb{sval("1"), ival(1), dval(1), bval(true), aval(sval("claimed")), aval(), kvlval(), pb{}.bytes(7, []byte("x")), nil, pb{}.varint(8, 0)}
	for s := slot(0); s < nSlots; s++ {
		key := slotKey(s)
		for i, v := range types {
			cases = append(cases, tc{fmt.Sprintf("slot %s as type %d (server)", key, i), one(kv(key, v))})
			cases = append(cases, tc{fmt.Sprintf("slot %s as type %d (client)", key, i), client(kv(key, v))})
		}
	}
	return cases
}

// slotKey is an attribute key that maps to slot s (with the default claim
// header).
func slotKey(s slot) string {
	switch s {
	case sClaimHeader:
		return "http.response.header.X-Error-Claim"
	case sClaimMeta:
		return "rpc.response.metadata.x_error_claim"
	case sAdjCount:
		return DefaultAdjustedCountKey
	}
	d := NewDecoder(DecoderConfig{})
	for _, k := range []string{
		"http.request.method", "http.method", "http.route", "rpc.service", "rpc.method",
		"http.response.status_code", "http.status_code", "rpc.grpc.status_code", "rpc.response.status_code",
		"error.claim", "http.request.resend_count", "retry.attempt", "retry.criteria_satisfied",
		"retry.suppressed", "dependency.fail_open", "service.peer.name", "peer.service", "server.address",
		"net.peer.name", "db.system.name", "db.system", "url.full", "http.url", "db.query.text",
		"db.statement", "upstream_cluster", "upstream_cluster.name", "sampler.type", "sampler.param",
	} {
		if got, ok := d.slotOf(k); ok && got == s {
			return k
		}
	}
	panic(fmt.Sprint("no key for slot ", s))
}

func TestProtoEdgeCases(t *testing.T) {
	for _, c := range protoEdgeCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, cfg := range []DecoderConfig{{}, {ClaimHeader: "X_Error_Claim"}, samplingDiffConfig, samplingDiffConfig2} {
				_, err := diffProto(t, cfg, c.b)
				// The kind of error matches pdata's too (one defect each).
				_, rerr := appendRequestPdata(NewDecoder(cfg), nil, c.b)
				if errors.Is(err, ErrLimit) != (rerr != nil && strings.Contains(rerr.Error(), "recursion depth")) {
					t.Fatalf("limit: wire decoder %v, pdata %v", err, rerr)
				}
				if errors.Is(err, io.ErrUnexpectedEOF) != errors.Is(rerr, io.ErrUnexpectedEOF) {
					t.Fatalf("truncation: wire decoder %v, pdata %v", err, rerr)
				}
			}
		})
	}
}

// TestProtoEdgeCaseResults pins what some edge cases decode to, beyond
// agreeing with pdata.
func TestProtoEdgeCaseResults(t *testing.T) {
	byName := map[string][]byte{}
	for _, c := range protoEdgeCases() {
		byName[c.name] = c.b
	}
	decode := func(name string) []graph.Span {
		t.Helper()
		spans, err := NewDecoder(DecoderConfig{}).appendProto(nil, byName[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return spans
	}
	if s := decode("duplicate attributes"); s[0].StatusCode != 503 || !s[0].Failed {
		t.Errorf("duplicate attributes: the first should win: %+v", s[0])
	}
	if s := decode("two service.names"); s[0].Service != "b" {
		t.Errorf("two service.names: the last non-empty should win: %q", s[0].Service)
	}
	if s := decode("deprecated spans only"); len(s) != 1 || s[0].Name != "old" {
		t.Errorf("deprecated spans only: %+v", s)
	}
	if s := decode("deprecated spans beside scope_spans"); len(s) != 1 || s[0].Name != "op" {
		t.Errorf("deprecated spans beside scope_spans: %+v", s)
	}
	if s := decode("resource after spans"); s[0].Service != "svc" || s[0].Version != "v1" {
		t.Errorf("resource after spans: %+v", s[0])
	}
	if s := decode("claim header array"); s[0].Claim != graph.ClaimUnclaimed {
		t.Errorf("claim header array: %+v", s[0])
	}
	for name, want := range map[string]struct {
		s graph.Sampling
		n float64
	}{
		"trace_state":                          {graph.SamplingRecorded, 4},
		"trace_state twice":                    {graph.SamplingRecorded, 4},
		"trace_state malformed":                {graph.SamplingInvalid, 1},
		"trace_state non-UTF-8":                {graph.SamplingInvalid, 1},
		"adjusted count and trace_state":       {graph.SamplingRecorded, 12},
		"adjusted count on the resource":       {graph.SamplingRecorded, 3},
		"adjusted count on the resource twice": {graph.SamplingNone, 0}, // the first, an empty value
		"jaeger tags":                          {graph.SamplingRecorded, 1000},
		"jaeger tags, param first":             {graph.SamplingRecorded, 2},
		"jaeger const":                         {graph.SamplingRecorded, 1},
	} {
		if s := decode(name); s[0].Sampling != want.s || s[0].AdjustedCount != want.n {
			t.Errorf("%s: %v %v, want %v %v", name, s[0].Sampling, s[0].AdjustedCount, want.s, want.n)
		}
	}
	for _, name := range []string{"arrays past the limit", "kvlists past the limit", "arrays far past the limit"} {
		_, err := NewDecoder(DecoderConfig{}).appendProto(nil, byName[name])
		if !errors.Is(err, ErrLimit) {
			t.Errorf("%s: %v, want ErrLimit", name, err)
		}
	}
	if _, err := NewDecoder(DecoderConfig{}).appendProto(nil, byName["length past the end"]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("length past the end: %v, want io.ErrUnexpectedEOF", err)
	}
}

// simRequests simulates scenarios shaped as the benchmarks' and the
// sample's, exported as a mesh of SDKs sends them, as protobuf requests.
func simRequests(t testing.TB) (reqs [][]byte, claimHeader []string) {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true}
	scs := []sim.Scenario{
		sim.Mesh(sim.MeshConfig{Seed: 7, APIs: 4, Depth: 25, Fanout: 3, GRPC: 0.3, FailOpen: 0.3, ErrorRate: 0.002, Policy: own}),
		sim.Mesh(sim.MeshConfig{Seed: 3, APIs: 3, Depth: 6, Fanout: 2, GRPC: 0.3, FailOpen: 0.2, ErrorRate: 0.01, Policy: own}),
		sim.Mesh(sim.MeshConfig{Seed: 11, APIs: 2, Depth: 4, Fanout: 4, GRPC: 0.8, FailOpen: 0.5, ErrorRate: 0.2, Policy: sim.Policy{Retry: sim.RetryNaive, Retries: 2}}),
	}
	scs[0].Faults = []sim.Fault{{Service: "svc-20-1", Rate: 0.2, Persistent: true}, {Service: "svc-6-0", Rate: 0.05, Persistent: true}}
	scs[2].ClaimHeader = "x-uber-error-claim"
	for i := range scs {
		sc := &scs[i]
		sc.Traces, sc.Start, sc.Spacing = 60, time.Unix(1_760_000_000, 0), time.Millisecond
		res, err := sim.Run(*sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, td := range res.Exports(uint64(i), 16, 8) {
			reqs = append(reqs, protoOf(t, td))
			claimHeader = append(claimHeader, sc.ClaimHeader)
		}
	}
	return reqs, claimHeader
}

// sampleRequests is testdata/sample.jsonl.gz (the README's sample) as
// protobuf requests.
func sampleRequests(t testing.TB) [][]byte {
	f, err := os.Open("../testdata/sample.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	var out [][]byte
	for sc.Scan() {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, protoOf(t, td))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProtoDiffCorpora(t *testing.T) {
	n := 0
	check := func(cfg DecoderConfig, b []byte) {
		t.Helper()
		spans, err := diffProto(t, cfg, b)
		if err != nil {
			t.Fatalf("corpus request rejected: %v", err)
		}
		n += len(spans)
	}
	sims, hdrs := simRequests(t)
	for i, b := range sims {
		check(DecoderConfig{ClaimHeader: hdrs[i]}, b)
	}
	for _, b := range sampleRequests(t) {
		check(DecoderConfig{}, b)
	}
	check(DecoderConfig{}, protoOf(t, benchTraces(333)))
	for _, td := range fuzzSeeds(t) {
		check(DecoderConfig{}, protoOf(t, td))
		check(DecoderConfig{ClaimHeader: "x-uber-error-claim"}, protoOf(t, td))
		check(samplingDiffConfig, protoOf(t, td))
		check(samplingDiffConfig2, protoOf(t, td))
	}
	if n < 10000 {
		t.Fatalf("only %d spans compared", n)
	}
}

// TestProtoDiffDamaged compares the decoders on damaged requests: every
// prefix of small requests, and single-byte changes.
func TestProtoDiffDamaged(t *testing.T) {
	var reqs [][]byte
	for _, td := range fuzzSeeds(t) {
		reqs = append(reqs, protoOf(t, td))
	}
	for _, c := range protoEdgeCases() {
		if len(c.b) < 4096 {
			reqs = append(reqs, c.b)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, b := range reqs {
		step := max(1, len(b)/300)
		for i := 0; i < len(b); i += step {
			diffProto(t, DecoderConfig{}, b[:i])
		}
		for range min(len(b), 300) {
			m := bytes.Clone(b)
			i := rng.IntN(len(m))
			switch rng.IntN(4) {
			case 0:
				m[i] ^= 1 << rng.IntN(8)
			case 1:
				m[i] = byte(rng.IntN(256))
			case 2:
				m[i]++
			case 3:
				m = append(m[:i], m[i+1:]...)
			}
			diffProto(t, DecoderConfig{}, m)
		}
	}
}

// fuzzCorpusDirs are seed corpora of fuzz targets whose inputs may be
// protobuf requests: the committed ones, and those a developer's
// earlier fuzzing left in the Go cache.
func fuzzCorpusFiles(t testing.TB) []string {
	var files []string
	for _, dir := range []string{"testdata/fuzz/FuzzDecodeProtoDiff", "testdata/fuzz/FuzzDecodeProto", "testdata/fuzz/FuzzReadFile"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		files = append(files, m...)
	}
	cache := os.Getenv("GOCACHE")
	if dir, err := os.UserCacheDir(); cache == "" && err == nil {
		cache = filepath.Join(dir, "go-build")
	}
	if cache != "" {
		for _, target := range []string{"FuzzDecodeProto", "FuzzReadFile", "FuzzDecodeProtoDiff"} {
			m, _ := filepath.Glob(filepath.Join(cache, "fuzz/github.com/stormradius/stormradius/ingest", target, "*"))
			files = append(files, m...)
		}
	}
	return files
}

// readCorpusFile reads a `go test fuzz v1` file holding one []byte.
func readCorpusFile(name string) ([]byte, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false
	}
	lines := strings.SplitN(string(data), "\n", 3)
	if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
		return nil, false
	}
	var s string
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"), "%q", &s); err != nil {
		return nil, false
	}
	return []byte(s), true
}

func TestProtoDiffFuzzCorpora(t *testing.T) {
	for _, name := range fuzzCorpusFiles(t) {
		b, ok := readCorpusFile(name)
		if !ok {
			continue
		}
		diffProto(t, DecoderConfig{}, b)
		// A length-prefixed stream: each message.
		for len(b) >= 4 {
			n := binary.BigEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				break
			}
			diffProto(t, DecoderConfig{}, b[4:4+n])
			b = b[4+n:]
		}
	}
}

// protoDiffSeeds are the seeds of FuzzDecodeProtoDiff.
func protoDiffSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, td := range fuzzSeeds(t) {
		seeds = append(seeds, protoOf(t, td))
	}
	for _, c := range protoEdgeCases() {
		if len(c.b) < 64<<10 {
			seeds = append(seeds, c.b)
		}
	}
	sims, _ := simRequests(t)
	seeds = append(seeds, sims[len(sims)-3:]...)
	seeds = append(seeds, sampleRequests(t)[:2]...)
	return seeds
}

// FuzzDecodeProtoDiff: the wire decoder and pdata's path agree on any
// input, and neither panics.
func FuzzDecodeProtoDiff(f *testing.F) {
	fuzzDiff(f, protoDiffSeeds(f), diffProto)
}

// fuzzDiff is a differential fuzz target: diff compares a decoder with
// pdata's path on any input (odd-length inputs with a claim header; those
// of length 2 or 3 modulo 4 with samplingDiffConfig or
// samplingDiffConfig2).
func fuzzDiff(f *testing.F, seeds [][]byte, diff func(testing.TB, DecoderConfig, []byte) ([]graph.Span, error)) {
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := DecoderConfig{}
		switch len(b) % 4 {
		case 2:
			cfg = samplingDiffConfig
		case 3:
			cfg = samplingDiffConfig2
		}
		if len(b)%2 == 1 {
			cfg.ClaimHeader = "X_Uber_Error_Claim"
		}
		spans, err := diff(t, cfg, b)
		if err == nil {
			checkSpans(t, spans)
		}
	})
}

// TestProtoWarmDecoder: a decoder reused across requests (its intern table
// warm, its attribute scratch dirty) gives what a fresh one gives.
func TestProtoWarmDecoder(t *testing.T) {
	sims, _ := simRequests(t)
	for _, c := range protoEdgeCases() {
		sims = append(sims, c.b)
	}
	warmDecoder(t, sims, func(d *Decoder, dst []graph.Span, b []byte) ([]graph.Span, error) { return d.appendProto(dst, b) })
}

// warmDecoder checks that one decoder decoding reqs in turn (decode)
// gives what a fresh one gives for each.
func warmDecoder(t *testing.T, reqs [][]byte, decode func(*Decoder, []graph.Span, []byte) ([]graph.Span, error)) {
	d := NewDecoder(DecoderConfig{})
	var dst []graph.Span
	for _, b := range reqs {
		want, werr := decode(NewDecoder(DecoderConfig{}), nil, b)
		var err error
		dst, err = decode(d, dst[:0], b)
		if (err == nil) != (werr == nil) || len(dst) != len(want) {
			t.Fatalf("warm: %v %d spans, fresh: %v %d spans", err, len(dst), werr, len(want))
		}
		for i := range want {
			if dst[i] != want[i] {
				t.Fatalf("warm decoder span %d: %+v, fresh %+v", i, dst[i], want[i])
			}
		}
	}
}

func TestProtoNoAllocs(t *testing.T) {
	b := protoOf(t, benchTraces(50))
	sims, _ := simRequests(t)
	sampled := protoOf(t, withTraceState(benchTraces(50), "congo=t61rcWkgMzE,ot=rv:abcdef01234567;th:e666"))
	for _, req := range [][]byte{b, sims[0], sims[len(sims)-1], sampled} {
		d := NewDecoder(DecoderConfig{})
		dst, err := d.appendProto(nil, req) // warm the intern table
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			dst, _ = d.appendProto(dst[:0], req)
		})
		if allocs != 0 {
			t.Fatalf("%v allocations per request of %d spans, want 0", allocs, len(dst))
		}
	}
}

func TestProtoInterning(t *testing.T) {
	b := protoOf(t, benchTraces(3))
	d := NewDecoder(DecoderConfig{})
	a, err := d.appendProto(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	// The request's bytes are reused: nothing decoded may point into them.
	for i := range b {
		b[i] = 0
	}
	c, err := d.appendProto(nil, protoOf(t, benchTraces(3)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("span %d changed with the request's bytes: %+v vs %+v", i, a[i], c[i])
		}
	}
}
