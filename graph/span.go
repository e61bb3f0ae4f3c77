// Package graph assembles spans into trace call trees (hops, attempts, calls)
// and aggregates them into per-root-API call graphs. It is pure: no I/O, no
// globals, deterministic for a given input.
package graph

import "encoding/hex"

// TraceID is an OpenTelemetry trace id.
type TraceID [16]byte

// SpanID is an OpenTelemetry span id. The zero value means "none".
type SpanID [8]byte

// String returns the lowercase hex form of the trace id.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsZero reports whether t is the all-zero (invalid) trace id.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// String returns the lowercase hex form of the span id.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s is the all-zero (absent) span id.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// Kind is a span kind, numbered as in OTLP.
type Kind uint8

// Span kinds, with OTLP's numbering.
const (
	KindUnspecified Kind = 0
	KindInternal    Kind = 1
	KindServer      Kind = 2
	KindClient      Kind = 3
	KindProducer    Kind = 4
	KindConsumer    Kind = 5
)

var kindNames = [...]string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}

// String returns the OTLP name of the kind without its prefix.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "UNKNOWN"
}

// Claim is the error-ownership claim carried by a response.
type Claim uint8

// Claim states. ClaimMissing is the zero value: no claim was carried.
const (
	ClaimMissing   Claim = 0
	ClaimClaimed   Claim = 1
	ClaimUnclaimed Claim = 2
	ClaimInvalid   Claim = 3 // a value that is neither: counted, treated as missing
)

var claimNames = [...]string{"missing", "claimed", "unclaimed", "invalid"}

// String returns the claim state as it appears in reports.
func (c Claim) String() string {
	if int(c) < len(claimNames) {
		return claimNames[c]
	}
	return "invalid"
}

// Valid reports whether the claim is claimed or unclaimed.
func (c Claim) Valid() bool { return c == ClaimClaimed || c == ClaimUnclaimed }

// Tri is an optional boolean: unset, false or true.
type Tri uint8

// Tri states.
const (
	Unset Tri = 0
	False Tri = 1
	True  Tri = 2
)

// TriOf returns True or False for b.
func TriOf(b bool) Tri {
	if b {
		return True
	}
	return False
}

// Set reports whether the value was given.
func (t Tri) Set() bool { return t != Unset }

// Span is one span as the analysis sees it: decoded once, at the edge, from
// OTLP (see package ingest), with every span convention already applied.
// It carries no attribute maps.
type Span struct {
	TraceID  TraceID
	SpanID   SpanID
	ParentID SpanID // zero: no parent

	Kind Kind

	Service   string // resource service.name
	Version   string // resource service.version
	Name      string // span name
	Operation string // SERVER: method + route, rpc service/method, else the name
	Peer      string // CLIENT: callee name for an uninstrumented callee

	Start int64 // unix nanoseconds
	End   int64 // unix nanoseconds

	Failed bool  // the failure rules of docs/SPEC.md §2 applied
	Claim  Claim // the claim this span carried (returned by SERVER, received by CLIENT)

	HasResend bool  // a resend number was present
	Resend    int32 // resend number (0 = first attempt)

	CriteriaSatisfied bool // retry.criteria_satisfied
	Suppressed        bool // retry.suppressed
	FailOpen          Tri  // dependency.fail_open as declared

	// Truncated reports that a name of the span was longer than
	// MaxNameLen and was cut (CapName) when it was decoded: counted by
	// whoever ingests it, not stored.
	Truncated bool

	// Target is a hash of url.full (or db.query.text), 0 when absent. Two
	// sequential attempts with different targets are never one call.
	Target uint64

	// StatusCode is the HTTP status code or the gRPC status code + 1000
	// (0 when neither was present); kept for display, not for analysis.
	StatusCode int32

	// Sampling says where AdjustedCount came from (docs/SPEC.md §2,
	// "sampling"): recorded on the span (an adjusted-count attribute, the
	// W3C tracestate's ot=th, Jaeger's sampler tags), configured for its
	// service or its input, or nothing; SamplingInvalid when what was
	// recorded is unusable (malformed, a probability of zero, negative or
	// above 1), which counts as an adjusted count of 1.
	Sampling Sampling
	// AdjustedCount is how many spans of the traffic the span stands
	// for: 1/p of the probability p it was sampled with (≥ 1), when
	// Sampling is SamplingRecorded or SamplingConfigured; 1 when
	// SamplingInvalid; 0 when SamplingNone.
	AdjustedCount float64
}

// Sampling says where a span's adjusted count came from.
type Sampling uint8

// Sampling sources. SamplingNone is the zero value: nothing recorded,
// nothing configured (an adjusted count of 1).
const (
	SamplingNone       Sampling = 0
	SamplingRecorded   Sampling = 1 // on the span or its resource
	SamplingConfigured Sampling = 2 // a fixed probability for its service or input
	SamplingInvalid    Sampling = 3 // recorded but unusable: counted, taken as 1
)

var samplingNames = [...]string{"none", "recorded", "configured", "invalid"}

// String returns "none", "recorded", "configured" or "invalid".
func (s Sampling) String() string {
	if int(s) < len(samplingNames) {
		return samplingNames[s]
	}
	return "invalid"
}
