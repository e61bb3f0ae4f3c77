package sim

import (
	"bufio"
	"encoding/binary"
	"io"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// pdataBuilder converts builders to pdata; it holds scratch space and is
// used by one goroutine at a time.
type pdataBuilder struct {
	nodes  []*node
	slot   []int32 // per node: resource slot in the trace being written, -1
	counts []int
	order  []int32
	sss    []ptrace.SpanSlice
}

func newPdataBuilder(nodes []*node) *pdataBuilder {
	pb := &pdataBuilder{nodes: nodes, slot: make([]int32, len(nodes)), counts: make([]int, len(nodes))}
	for i := range pb.slot {
		pb.slot[i] = -1
	}
	return pb
}

// build writes trace b as pdata: one ResourceSpans per service, in order of
// first appearance, spans in creation (depth-first) order.
func (g *pdataBuilder) build(b *builder) ptrace.Traces {
	g.order = g.order[:0]
	for i := range b.recs {
		n := b.recs[i].node
		if g.slot[n] < 0 {
			g.slot[n] = int32(len(g.order))
			g.order = append(g.order, n)
		}
		g.counts[n]++
	}
	td := ptrace.NewTraces()
	rss := td.ResourceSpans()
	rss.EnsureCapacity(len(g.order))
	g.sss = g.sss[:0]
	for _, ni := range g.order {
		n := g.nodes[ni]
		rs := rss.AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.EnsureCapacity(2)
		ra.PutStr("service.name", n.name)
		if n.svc.Version != "" {
			ra.PutStr("service.version", n.svc.Version)
		}
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(ScopeName)
		sl := ss.Spans()
		sl.EnsureCapacity(g.counts[ni])
		g.sss = append(g.sss, sl)
	}
	for i := range b.recs {
		r := &b.recs[i]
		sp := g.sss[g.slot[r.node]].AppendEmpty()
		g.fill(b, r, sp)
	}
	for _, ni := range g.order {
		g.slot[ni] = -1
		g.counts[ni] = 0
	}
	return td
}

func spanID(v uint64) pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], v)
	return id
}

func putClaim(a pcommon.Map, n *node, c claim) {
	if c == claimMissing {
		return
	}
	if n.claimArray {
		a.PutEmptySlice(n.claimKey).AppendEmpty().SetStr(claimValues[c])
	} else {
		a.PutStr(n.claimKey, claimValues[c])
	}
}

func httpStatus(failed bool) int64 {
	if failed {
		return 503
	}
	return 200
}

func grpcStatus(failed bool) int64 {
	if failed {
		return 14 // UNAVAILABLE
	}
	return 0
}

func (g *pdataBuilder) fill(b *builder, r *rec, sp ptrace.Span) {
	sp.SetTraceID(b.id)
	sp.SetSpanID(spanID(r.id))
	if r.parent != 0 {
		sp.SetParentSpanID(spanID(r.parent))
	}
	sp.SetStartTimestamp(pcommon.Timestamp(r.start))
	sp.SetEndTimestamp(pcommon.Timestamp(r.end))
	if r.failed {
		sp.Status().SetCode(ptrace.StatusCodeError)
	}
	a := sp.Attributes()
	if r.kind == kindServer {
		n := g.nodes[r.node]
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetName(n.serverName)
		a.EnsureCapacity(5)
		if n.svc.Protocol == HTTP {
			a.PutStr("http.request.method", n.method)
			a.PutStr("http.route", n.route)
			a.PutStr("url.path", n.route)
			a.PutInt("http.response.status_code", httpStatus(r.failed))
		} else {
			a.PutStr("rpc.system", "grpc")
			a.PutStr("rpc.service", n.rpcSvc)
			a.PutStr("rpc.method", n.rpcMethod)
			a.PutInt("rpc.grpc.status_code", grpcStatus(r.failed))
		}
		putClaim(a, n, r.claim)
		return
	}
	ec := r.edge
	callee := g.nodes[r.callee]
	p := &g.nodes[r.node].svc.Policy
	sp.SetKind(ptrace.SpanKindClient)
	sp.SetName(ec.clientName)
	a.EnsureCapacity(clientAttrs(ec, callee, p, r))
	switch {
	case callee.virtual:
		a.PutStr(ec.nameAttr, callee.name)
		a.PutStr("db.query.text", ec.targets[r.seq])
	case callee.svc.Protocol == HTTP:
		a.PutStr("http.request.method", callee.method)
		a.PutStr("url.full", ec.targets[r.seq])
		a.PutStr("server.address", callee.name)
		a.PutInt("http.response.status_code", httpStatus(r.failed))
	default:
		a.PutStr("rpc.system", "grpc")
		a.PutStr("rpc.service", callee.rpcSvc)
		a.PutStr("rpc.method", callee.rpcMethod)
		a.PutStr("server.address", callee.name)
		if u := ec.targets[r.seq]; u != "" {
			a.PutStr("url.full", u)
		}
		a.PutInt("rpc.grpc.status_code", grpcStatus(r.failed))
	}
	if r.resend > 0 && p.ResendAttr {
		a.PutInt(ec.resendKey, int64(r.resend))
	}
	if ec.DeclareFailOpen {
		a.PutBool("dependency.fail_open", true)
	}
	if !callee.virtual {
		putClaim(a, callee, r.claim)
	}
	if p.CriteriaAttr {
		if r.criteria {
			a.PutBool("retry.criteria_satisfied", true)
		}
		if r.suppressed {
			a.PutBool("retry.suppressed", true)
		}
	}
}

// clientAttrs is the number of attributes fill writes on a CLIENT span.
func clientAttrs(ec *edgeC, callee *node, p *Policy, r *rec) int {
	n := 0
	switch {
	case callee.virtual:
		n = 2
	case callee.svc.Protocol == HTTP:
		n = 4
	default:
		n = 5
		if ec.targets[r.seq] != "" {
			n++
		}
	}
	if r.resend > 0 && p.ResendAttr {
		n++
	}
	if ec.DeclareFailOpen {
		n++
	}
	if !callee.virtual && r.claim != claimMissing {
		n++
	}
	if p.CriteriaAttr {
		if r.criteria {
			n++
		}
		if r.suppressed {
			n++
		}
	}
	return n
}

// WriteJSONLine writes td as one line of OTLP JSON (an
// ExportTraceServiceRequest), as the collector's file exporter does.
func WriteJSONLine(w io.Writer, td ptrace.Traces) error {
	var m ptrace.JSONMarshaler
	buf, err := m.MarshalTraces(td)
	if err != nil {
		return err
	}
	buf = append(buf, '\n')
	_, err = w.Write(buf)
	return err
}

// WriteProtoMessage writes td as binary OTLP protobuf preceded by its length
// as 4 bytes big-endian, as the collector's file exporter does with
// format: proto.
func WriteProtoMessage(w io.Writer, td ptrace.Traces) error {
	var m ptrace.ProtoMarshaler
	body, err := m.MarshalTraces(td)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// WriteJSONLines writes every trace of r as OTLP JSON lines, one
// ExportTraceServiceRequest per trace, in order.
func (r *Result) WriteJSONLines(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	for i := range r.Traces {
		if err := WriteJSONLine(bw, r.Traces[i].Data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteProto writes every trace of r as length-prefixed binary OTLP
// protobuf messages, one per trace, in order.
func (r *Result) WriteProto(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	for i := range r.Traces {
		if err := WriteProtoMessage(bw, r.Traces[i].Data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONLines parses OTLP JSON lines as written by WriteJSONLines (one
// ptrace.Traces per non-empty line).
func ReadJSONLines(rd io.Reader) ([]ptrace.Traces, error) {
	var u ptrace.JSONUnmarshaler
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<30)
	var out []ptrace.Traces
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return nil, err
		}
		out = append(out, td)
	}
	return out, sc.Err()
}

// ReadProto parses length-prefixed binary OTLP protobuf messages as written
// by WriteProto.
func ReadProto(rd io.Reader) ([]ptrace.Traces, error) {
	var u ptrace.ProtoUnmarshaler
	br := bufio.NewReader(rd)
	var out []ptrace.Traces
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		td, err := u.UnmarshalTraces(buf)
		if err != nil {
			return nil, err
		}
		out = append(out, td)
	}
}
