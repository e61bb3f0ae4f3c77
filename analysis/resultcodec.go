package analysis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/graph/wire"
	"github.com/stormradius/stormradius/radius"
)

// resultCodecVersion is the first byte of an encoded TraceResult; the
// result of a sampled trace (a weight above 1, or sampling flags) is
// written as resultCodecSampled, its weight and flags after its flags,
// so that unsampled results stay as they always were. Likewise a result
// with version claim counts (TraceResult.VersionClaims) sets flag
// flagVersionClaims and has them after its nodes: a result without
// them is written as before.
const (
	resultCodecVersion = 1
	resultCodecSampled = 2
)

// The flags byte's bits.
const (
	flagRootFailed    = 1
	flagRemoteParent  = 2
	flagSplit         = 4
	flagVersionClaims = 8
)

// ErrCorruptResult is returned (wrapped) by DecodeResult for data that is
// not an encoded result.
var ErrCorruptResult = errors.New("corrupt encoded result")

// ResultEncoder writes TraceResults in a compact binary form (names once
// per result, numbers as varints): what stores keep per trace, a few
// hundred bytes where JSON takes kilobytes. The zero value is ready; not
// safe for concurrent use.
type ResultEncoder struct {
	names map[string]uint64
	table []string
}

// Append appends the binary form of r to b.
func (e *ResultEncoder) Append(b []byte, r *TraceResult) []byte {
	table := e.nameTable(r)

	uv := binary.AppendUvarint
	v := binary.AppendVarint
	sampled := r.W() > 1 || r.SamplingFlags != 0
	if sampled {
		b = append(b, resultCodecSampled)
	} else {
		b = append(b, resultCodecVersion)
	}
	b = append(b, r.TraceID[:]...)
	b = uv(b, uint64(len(table)))
	for _, s := range table {
		b = uv(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = uv(b, e.names[r.API])
	b = v(b, r.Start)
	b = v(b, r.Window)
	b = uv(b, uint64(r.Spans))
	b = uv(b, uint64(r.Fragments))
	b = append(b, resultFlags(r))
	if sampled {
		b = uv(b, uint64(r.W()))
		b = append(b, r.SamplingFlags)
	}
	b = uv(b, uint64(len(r.Versions)))
	for _, x := range r.Versions {
		b = uv(b, e.names[x.Service])
		b = uv(b, e.names[x.Version])
	}
	b = uv(b, uint64(len(r.Events)))
	for i := range r.Events {
		ev := &r.Events[i]
		b = uv(b, e.names[ev.Owner.Service])
		b = uv(b, e.names[ev.Owner.Operation])
		b = uv(b, uint64(ev.Hop))
		b = v(b, int64(ev.Radius))
		b = v(b, int64(ev.Chain))
		b = v(b, ev.Start-r.Start)
	}
	b = v(b, int64(r.Radius))
	b = uv(b, uint64(len(r.Owners)))
	for i := range r.Owners {
		o := &r.Owners[i]
		b = uv(b, e.names[o.Node.Service])
		b = uv(b, e.names[o.Node.Operation])
		b = v(b, o.Hops)
		b = v(b, o.First)
		b = v(b, o.Spurious)
	}
	b = v(b, r.Suppressed)
	b = v(b, r.Hops)
	b = v(b, r.Counterfactual)
	b = uv(b, uint64(len(r.Services)))
	for i := range r.Services {
		s := &r.Services[i]
		b = uv(b, e.names[s.Service])
		for _, c := range s.Claims {
			b = v(b, c)
		}
		for _, x := range [...]int64{s.Misattributed, s.NaiveMisattributed, s.Eligible, s.Mismatches, s.ContextDrops,
			s.OwnedFailures, s.Requests, s.VirtualRequests, s.Counterfactual, s.Spurious} {
			b = v(b, x)
		}
	}
	b = uv(b, uint64(len(r.Nodes)))
	for i := range r.Nodes {
		n := &r.Nodes[i]
		b = uv(b, e.names[n.Node.Service])
		b = uv(b, e.names[n.Node.Operation])
		b = v(b, n.Requests)
		b = v(b, n.Owned)
	}
	if len(r.VersionClaims) > 0 {
		b = uv(b, uint64(len(r.VersionClaims)))
		for i := range r.VersionClaims {
			x := &r.VersionClaims[i]
			b = uv(b, e.names[x.Service])
			b = uv(b, e.names[x.Version])
			for _, n := range [...]int64{x.FailedHops, x.ClaimedHops, x.UnclaimedAnswers, x.RetriedUnclaimed, x.Suppressed} {
				b = v(b, n)
			}
		}
	}
	return b
}

// resultFlags is the flags byte of r's encoding.
func resultFlags(r *TraceResult) byte {
	var flags byte
	if r.RootFailed {
		flags |= flagRootFailed
	}
	if r.RemoteParent {
		flags |= flagRemoteParent
	}
	if r.Split {
		flags |= flagSplit
	}
	if len(r.VersionClaims) > 0 {
		flags |= flagVersionClaims
	}
	return flags
}

// nameTable numbers every name r holds, once each, in the order the
// encoding writes them (e.names maps a name to its number), and returns
// them.
func (e *ResultEncoder) nameTable(r *TraceResult) []string {
	if e.names == nil || len(e.names) > 4096 {
		e.names = make(map[string]uint64, 32)
	}
	clear(e.names)
	table := e.table[:0]
	name := func(s string) {
		if _, ok := e.names[s]; !ok {
			e.names[s] = uint64(len(table))
			table = append(table, s)
		}
	}
	name(r.API)
	for _, v := range r.Versions {
		name(v.Service)
		name(v.Version)
	}
	for i := range r.VersionClaims {
		name(r.VersionClaims[i].Service)
		name(r.VersionClaims[i].Version)
	}
	for i := range r.Events {
		name(r.Events[i].Owner.Service)
		name(r.Events[i].Owner.Operation)
	}
	for i := range r.Owners {
		name(r.Owners[i].Node.Service)
		name(r.Owners[i].Node.Operation)
	}
	for i := range r.Services {
		name(r.Services[i].Service)
	}
	for i := range r.Nodes {
		name(r.Nodes[i].Node.Service)
		name(r.Nodes[i].Node.Operation)
	}
	e.table = table[:0]
	return table
}

// resultReader reads an encoded result, remembering the first error.
type resultReader struct{ wire.Reader }

func corruptResult(what string) error { return fmt.Errorf("%w: %s", ErrCorruptResult, what) }

func (r *resultReader) int(what string) int {
	x := r.Varint(what)
	if x < math.MinInt32 || x > math.MaxInt32 {
		r.Fail(what + " out of range")
		return 0
	}
	return int(x)
}

// DecodeResult decodes a result written by ResultEncoder.Append, names
// passed through intern when it is not nil. Any input is safe: data that is
// not an encoded result gives an error wrapping ErrCorruptResult.
func DecodeResult(b []byte, intern func([]byte) string) (*TraceResult, error) {
	r := &resultReader{wire.Reader{B: b, Corrupt: corruptResult}}
	if len(b) < 17 || b[0] != resultCodecVersion && b[0] != resultCodecSampled {
		return nil, fmt.Errorf("%w: bad header", ErrCorruptResult)
	}
	out := &TraceResult{}
	copy(out.TraceID[:], b[1:17])
	r.B = b[17:]
	nNames := r.Count(1, "names")
	table := make([]string, 0, nNames)
	table = r.Names(table, nNames, intern)
	out.API = r.Str(table, "api")
	out.Start = r.Varint("start")
	out.Window = r.Varint("window")
	out.Spans = int(min(r.Uvarint("spans"), math.MaxInt32))
	out.Fragments = int(min(r.Uvarint("fragments"), math.MaxInt32))
	var flags byte
	if len(r.B) == 0 {
		r.Fail("flags")
	} else {
		flags = r.B[0]
		out.RootFailed, out.RemoteParent, out.Split = flags&flagRootFailed != 0, flags&flagRemoteParent != 0, flags&flagSplit != 0
		r.B = r.B[1:]
	}
	if b[0] == resultCodecSampled {
		w := r.Uvarint("weight")
		if w < 1 || w > graph.MaxAdjustedCount {
			r.Fail("weight out of range")
		}
		out.Weight = int64(w)
		out.SamplingFlags = r.Byte("sampling flags") & (graph.SamplingConflict | graph.SamplingUnusable)
	}
	if n := r.Count(2, "versions"); n > 0 {
		out.Versions = make([]ServiceVersion, n)
		for i := range out.Versions {
			out.Versions[i] = ServiceVersion{Service: r.Str(table, "version service"), Version: r.Str(table, "version")}
		}
	}
	out.Events = make([]Event, r.Count(6, "events"))
	for i := range out.Events {
		ev := &out.Events[i]
		ev.Owner = graph.Node{Service: r.Str(table, "owner"), Operation: r.Str(table, "owner operation")}
		ev.Hop = int32(min(r.Uvarint("hop"), math.MaxInt32))
		ev.Radius = r.int("radius")
		ev.Chain = r.int("chain")
		ev.Start = out.Start + r.Varint("event start")
	}
	out.Radius = r.int("trace radius")
	if n := r.Count(5, "owners"); n > 0 {
		out.Owners = make([]radius.OwnerStat, n)
		for i := range out.Owners {
			o := &out.Owners[i]
			o.Node = graph.Node{Service: r.Str(table, "owner"), Operation: r.Str(table, "owner operation")}
			o.Hops, o.First, o.Spurious = r.Varint("owner hops"), r.Varint("owner first"), r.Varint("owner spurious")
		}
	}
	out.Suppressed, out.Hops, out.Counterfactual = r.Varint("suppressed"), r.Varint("hops"), r.Varint("counterfactual")
	out.Services = make([]ServiceResult, r.Count(17, "services"))
	for i := range out.Services {
		s := &out.Services[i]
		s.Service = r.Str(table, "service")
		for k := range s.Claims {
			s.Claims[k] = r.Varint("claims")
		}
		for _, p := range [...]*int64{&s.Misattributed, &s.NaiveMisattributed, &s.Eligible, &s.Mismatches, &s.ContextDrops,
			&s.OwnedFailures, &s.Requests, &s.VirtualRequests, &s.Counterfactual, &s.Spurious} {
			*p = r.Varint("service counts")
		}
	}
	if n := r.Count(4, "nodes"); n > 0 || r.Err == nil {
		out.Nodes = make([]NodeCount, n)
		for i := range out.Nodes {
			nc := &out.Nodes[i]
			nc.Node = graph.Node{Service: r.Str(table, "node"), Operation: r.Str(table, "node operation")}
			nc.Requests, nc.Owned = r.Varint("node requests"), r.Varint("node owned")
		}
	}
	if flags&flagVersionClaims != 0 {
		out.VersionClaims = decodeVersionClaims(r, table)
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if len(r.B) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorruptResult, len(r.B))
	}
	return out, nil
}

// decodeVersionClaims reads the version claim counts Append writes after
// the nodes (flagVersionClaims): at least one.
func decodeVersionClaims(r *resultReader, table []string) []VersionClaims {
	n := r.Count(7, "version claims")
	if n == 0 {
		r.Fail("version claims: none")
		return nil
	}
	out := make([]VersionClaims, n)
	for i := range out {
		x := &out[i]
		x.ServiceVersion = ServiceVersion{Service: r.Str(table, "version claims service"), Version: r.Str(table, "version claims version")}
		for _, p := range [...]*int64{&x.FailedHops, &x.ClaimedHops, &x.UnclaimedAnswers, &x.RetriedUnclaimed, &x.Suppressed} {
			*p = r.Varint("version claims counts")
		}
	}
	return out
}
