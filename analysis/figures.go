package analysis

import (
	"fmt"
	"strings"

	"github.com/stormradius/stormradius/attribution"
	"github.com/stormradius/stormradius/graph"
)

// Figures is the one definition of every figure a Report holds and the
// stores keep as rollups: its name, type, scope, how it merges, where each
// store keeps it and how to reach it in a Report. Report.Merge, Prune,
// the stores' rollup writes and reads and their schema checks are all
// derived from it.
//
// (ServiceResult.merge, which Report.Add runs per service of every trace,
// is the table written out for speed; a test checks it against the table.)
//
// Adding a figure means:
//   - a field in the aggregate of its scope (Report, APIAgg, OwnerAgg,
//     ServiceResult, NodeAgg, VersionAgg) and one entry here, with an
//     accessor to the field, a SQLite table and column and a ClickHouse
//     stat code not used before;
//   - a migration of each store adding the column (SQLite: ALTER TABLE …
//     ADD COLUMN … NOT NULL DEFAULT 0, or a new table for a new key) and
//     the stat (ClickHouse: the rollups table's stat Enum8, the code and
//     Name as its label);
//   - what one trace contributes to it, in Report.Add (sign × the
//     trace's value, so that adding a result and taking it away again
//     leaves the report as it was);
//   - a case in store/storetest's figure conformance test (which fails
//     for an entry without one).
//
// Stored entries are on disk: a SQLite column, a stat code and a Name
// must never change (analysis/figures_test.go pins them by hand). Every
// figure merges by MergeSum or MergeHistogram today; another kind (a
// maximum, a sketch) needs its SQL in mergeSQL, its merge in mergeAgg
// (its accessors sorted by kind in init) and a ClickHouse table that
// can keep it (rollups is a SummingMergeTree).
var Figures = []Figure{
	{Name: "spans", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "spans"}, Stat: 0,
		Count: func(a Agg) *int64 { return &a.Report.Spans }},
	{Name: "traces", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "traces"}, Stat: 1,
		Count: func(a Agg) *int64 { return &a.Report.Traces }},
	{Name: "fragments", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "fragments"}, Stat: 2,
		Count: func(a Agg) *int64 { return &a.Report.Fragments }},
	// Sampled traffic (docs/SPEC.md §4.9): what weighting added, the
	// variance sums, the traces whose sampling was in conflict or
	// unusable; all zero for unsampled traces.
	{Name: "traces_excess", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "traces_excess"}, Stat: 3,
		Count: func(a Agg) *int64 { return &a.Report.TracesExcess }},
	{Name: "spans_excess", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "spans_excess"}, Stat: 4,
		Count: func(a Agg) *int64 { return &a.Report.SpansExcess }},
	{Name: "traces_var", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "traces_var"}, Stat: 5,
		Count: func(a Agg) *int64 { return &a.Report.TracesVar }},
	{Name: "sampling_conflicts", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "sampling_conflicts"}, Stat: 6,
		Count: func(a Agg) *int64 { return &a.Report.SamplingConflicts }},
	{Name: "sampling_unusable", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "sampling_unusable"}, Stat: 7,
		Count: func(a Agg) *int64 { return &a.Report.SamplingUnusable }},
	// Traces whose spans reached more than one partition, set aside.
	{Name: "traces_split", Type: TypeCount, Scope: ScopeTotals, Merge: MergeSum, SQLite: Column{"rollup_totals", "traces_split"}, Stat: 8,
		Count: func(a Agg) *int64 { return &a.Report.TracesSplit }},

	{Name: "api_traces", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "traces"}, Stat: 10,
		Count: func(a Agg) *int64 { return &a.API.Traces }},
	{Name: "api_failed", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "failed"}, Stat: 11,
		Count: func(a Agg) *int64 { return &a.API.Failed }},
	{Name: "api_root_errors", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "root_errors"}, Stat: 12,
		Count: func(a Agg) *int64 { return &a.API.RootErrors }},
	{Name: "api_remote_parent", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "remote_parent"}, Stat: 13,
		Count: func(a Agg) *int64 { return &a.API.RemoteParent }},
	{Name: "api_radius_sum", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "radius_sum"}, Stat: 14,
		Count: func(a Agg) *int64 { return &a.API.RadiusSum }},
	{Name: "api_suppressed", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "suppressed"}, Stat: 15,
		Count: func(a Agg) *int64 { return &a.API.Suppressed }},
	{Name: "api_hops", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "hops"}, Stat: 16,
		Count: func(a Agg) *int64 { return &a.API.Hops }},
	{Name: "api_counterfactual", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "counterfactual"}, Stat: 17,
		Count: func(a Agg) *int64 { return &a.API.Counterfactual }},
	{Name: "api_misattributed", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "misattributed"}, Stat: 18,
		Count: func(a Agg) *int64 { return &a.API.Misattributed }},
	{Name: "api_naive", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "naive"}, Stat: 19,
		Count: func(a Agg) *int64 { return &a.API.Naive }},
	{Name: "api_eligible", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "eligible"}, Stat: 20,
		Count: func(a Agg) *int64 { return &a.API.Eligible }},
	{Name: "api_fragments", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "fragments"}, Stat: 21,
		Count: func(a Agg) *int64 { return &a.API.Fragments }},
	{Name: "api_events", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "events"}, Stat: 22,
		Count: func(a Agg) *int64 { return &a.API.Events }},
	{Name: "api_excess", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "excess"}, Stat: 23,
		Count: func(a Agg) *int64 { return &a.API.Excess }},
	{Name: "api_var", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var"}, Stat: 24,
		Count: func(a Agg) *int64 { return &a.API.Var }},
	{Name: "api_var_failed", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_failed"}, Stat: 25,
		Count: func(a Agg) *int64 { return &a.API.VarFailed }},
	{Name: "api_var_root", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_root"}, Stat: 26,
		Count: func(a Agg) *int64 { return &a.API.VarRoot }},
	{Name: "api_var_radius", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_radius"}, Stat: 27,
		Count: func(a Agg) *int64 { return &a.API.VarRadius }},
	{Name: "api_var_radius2", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_radius2"}, Stat: 28,
		Count: func(a Agg) *int64 { return &a.API.VarRadius2 }},
	{Name: "api_var_mis2", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_mis2"}, Stat: 32,
		Count: func(a Agg) *int64 { return &a.API.VarMis2 }},
	{Name: "api_var_mis_elig", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_mis_elig"}, Stat: 33,
		Count: func(a Agg) *int64 { return &a.API.VarMisElig }},
	{Name: "api_var_elig2", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "var_elig2"}, Stat: 34,
		Count: func(a Agg) *int64 { return &a.API.VarElig2 }},
	// Traces with W = 1 by where the tail_sampling hash puts their id
	// (TailCounts): without a failure below 1/16, below 1/2 and all,
	// with one below 1/2 and all.
	{Name: "api_tail_clean_16", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "tail_clean_16"}, Stat: 90,
		Count: func(a Agg) *int64 { return &a.API.TailClean16 }},
	{Name: "api_tail_clean_2", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "tail_clean_2"}, Stat: 91,
		Count: func(a Agg) *int64 { return &a.API.TailClean2 }},
	{Name: "api_tail_clean", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "tail_clean"}, Stat: 92,
		Count: func(a Agg) *int64 { return &a.API.TailClean }},
	{Name: "api_tail_failed_2", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "tail_failed_2"}, Stat: 93,
		Count: func(a Agg) *int64 { return &a.API.TailFailed2 }},
	{Name: "api_tail_failed", Type: TypeCount, Scope: ScopeAPI, Merge: MergeSum, SQLite: Column{"rollup_api", "tail_failed"}, Stat: 94,
		Count: func(a Agg) *int64 { return &a.API.TailFailed }},
	{Name: "radius", Type: TypeIntHist, Scope: ScopeAPIHist, Merge: MergeHistogram, SQLite: Column{"rollup_radius", "radius"}, Stat: 30,
		Hist: func(a Agg) Hist { return Hist{Ints: a.API.Radius} }},
	{Name: "amp", Type: TypeFloatHist, Scope: ScopeAPIHist, Merge: MergeHistogram, SQLite: Column{"rollup_amp", "amp"}, Stat: 31,
		Hist: func(a Agg) Hist { return Hist{Floats: a.API.Amplification} }},

	{Name: "owner_events", Type: TypeCount, Scope: ScopeOwner, Merge: MergeSum, SQLite: Column{"rollup_owner", "events"}, Stat: 40,
		Count: func(a Agg) *int64 { return &a.Owner.Events }},
	{Name: "owner_spurious", Type: TypeCount, Scope: ScopeOwner, Merge: MergeSum, SQLite: Column{"rollup_owner", "spurious"}, Stat: 41,
		Count: func(a Agg) *int64 { return &a.Owner.Spurious }},
	{Name: "owner_traces", Type: TypeCount, Scope: ScopeOwner, Merge: MergeSum, SQLite: Column{"rollup_owner", "traces"}, Stat: 42,
		Count: func(a Agg) *int64 { return &a.Owner.Traces }},
	{Name: "owner_suppressed", Type: TypeCount, Scope: ScopeOwner, Merge: MergeSum, SQLite: Column{"rollup_owner", "suppressed"}, Stat: 43,
		Count: func(a Agg) *int64 { return &a.Owner.Suppressed }},
	{Name: "owner_radius_sum", Type: TypeCount, Scope: ScopeOwner, Merge: MergeSum, SQLite: Column{"rollup_owner", "radius_sum"}, Stat: 44,
		Count: func(a Agg) *int64 { return &a.Owner.RadiusSum }},
	{Name: "owner_radius", Type: TypeIntHist, Scope: ScopeOwnerHist, Merge: MergeHistogram, SQLite: Column{"rollup_owner_radius", "radius"}, Stat: 45,
		Hist: func(a Agg) Hist { return Hist{Ints: a.Owner.Radius} }},
	{Name: "owner_amp", Type: TypeFloatHist, Scope: ScopeOwnerHist, Merge: MergeHistogram, SQLite: Column{"rollup_owner_amp", "amp"}, Stat: 46,
		Hist: func(a Agg) Hist { return Hist{Floats: a.Owner.Amplification} }},

	{Name: "svc_correct", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "correct"}, Stat: 50,
		Count: func(a Agg) *int64 { return &a.Service.Claims[attribution.AuditCorrect] }},
	{Name: "svc_false_claim", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "false_claim"}, Stat: 51,
		Count: func(a Agg) *int64 { return &a.Service.Claims[attribution.AuditFalseClaim] }},
	{Name: "svc_false_unclaim", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "false_unclaim"}, Stat: 52,
		Count: func(a Agg) *int64 { return &a.Service.Claims[attribution.AuditFalseUnclaim] }},
	{Name: "svc_missing", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "missing"}, Stat: 53,
		Count: func(a Agg) *int64 { return &a.Service.Claims[attribution.AuditMissing] }},
	{Name: "svc_invalid", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "invalid"}, Stat: 54,
		Count: func(a Agg) *int64 { return &a.Service.Claims[attribution.AuditInvalid] }},
	{Name: "svc_mismatches", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "mismatches"}, Stat: 55,
		Count: func(a Agg) *int64 { return &a.Service.Mismatches }},
	{Name: "svc_misattributed", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "misattributed"}, Stat: 56,
		Count: func(a Agg) *int64 { return &a.Service.Misattributed }},
	{Name: "svc_naive", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "naive"}, Stat: 57,
		Count: func(a Agg) *int64 { return &a.Service.NaiveMisattributed }},
	{Name: "svc_eligible", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "eligible"}, Stat: 58,
		Count: func(a Agg) *int64 { return &a.Service.Eligible }},
	{Name: "svc_context_drops", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "context_drops"}, Stat: 59,
		Count: func(a Agg) *int64 { return &a.Service.ContextDrops }},
	{Name: "svc_owned", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "owned"}, Stat: 60,
		Count: func(a Agg) *int64 { return &a.Service.OwnedFailures }},
	{Name: "svc_requests", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "requests"}, Stat: 61,
		Count: func(a Agg) *int64 { return &a.Service.Requests }},
	{Name: "svc_virtual_requests", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "virtual_requests"}, Stat: 62,
		Count: func(a Agg) *int64 { return &a.Service.VirtualRequests }},
	{Name: "svc_counterfactual", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "counterfactual"}, Stat: 63,
		Count: func(a Agg) *int64 { return &a.Service.Counterfactual }},
	{Name: "svc_spurious", Type: TypeCount, Scope: ScopeService, Merge: MergeSum, SQLite: Column{"rollup_service", "spurious"}, Stat: 64,
		Count: func(a Agg) *int64 { return &a.Service.Spurious }},

	{Name: "node_requests", Type: TypeCount, Scope: ScopeNode, Merge: MergeSum, SQLite: Column{"rollup_node", "requests"}, Stat: 70,
		Count: func(a Agg) *int64 { return &a.Node.Requests }},
	{Name: "node_owned", Type: TypeCount, Scope: ScopeNode, Merge: MergeSum, SQLite: Column{"rollup_node", "owned"}, Stat: 71,
		Count: func(a Agg) *int64 { return &a.Node.Owned }},

	{Name: "ver_traces", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "traces"}, Stat: 80,
		Count: func(a Agg) *int64 { return &a.Version.Traces }},
	{Name: "ver_failed", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "failed"}, Stat: 81,
		Count: func(a Agg) *int64 { return &a.Version.Failed }},
	{Name: "ver_root_errors", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "root_errors"}, Stat: 82,
		Count: func(a Agg) *int64 { return &a.Version.RootErrors }},
	{Name: "ver_radius_sum", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "radius_sum"}, Stat: 83,
		Count: func(a Agg) *int64 { return &a.Version.RadiusSum }},
	{Name: "ver_excess", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "excess"}, Stat: 86,
		Count: func(a Agg) *int64 { return &a.Version.Excess }},
	{Name: "ver_var", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "var"}, Stat: 87,
		Count: func(a Agg) *int64 { return &a.Version.Var }},
	// How the version's hops answered claims and honoured those they
	// received (the rollout gate's claim checks).
	{Name: "ver_failed_hops", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "failed_hops"}, Stat: 100,
		Count: func(a Agg) *int64 { return &a.Version.FailedHops }},
	{Name: "ver_claimed_hops", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "claimed_hops"}, Stat: 101,
		Count: func(a Agg) *int64 { return &a.Version.ClaimedHops }},
	{Name: "ver_unclaimed_answers", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "unclaimed_answers"}, Stat: 102,
		Count: func(a Agg) *int64 { return &a.Version.UnclaimedAnswers }},
	{Name: "ver_retried_unclaimed", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "retried_unclaimed"}, Stat: 103,
		Count: func(a Agg) *int64 { return &a.Version.RetriedUnclaimed }},
	{Name: "ver_suppressed", Type: TypeCount, Scope: ScopeVersion, Merge: MergeSum, SQLite: Column{"rollup_version", "suppressed"}, Stat: 104,
		Count: func(a Agg) *int64 { return &a.Version.Suppressed }},
	{Name: "ver_radius", Type: TypeIntHist, Scope: ScopeVersionHist, Merge: MergeHistogram, SQLite: Column{"rollup_version_radius", "radius"}, Stat: 84,
		Hist: func(a Agg) Hist { return Hist{Ints: a.Version.Radius} }},
	{Name: "ver_amp", Type: TypeFloatHist, Scope: ScopeVersionHist, Merge: MergeHistogram, SQLite: Column{"rollup_version_amp", "amp"}, Stat: 85,
		Hist: func(a Agg) Hist { return Hist{Floats: a.Version.Amplification} }},
}

// Figure is one stored and reported figure: an entry of Figures.
type Figure struct {
	// Name names the figure; it is also the label of its ClickHouse stat
	// (on disk).
	Name  string
	Type  Type
	Scope Scope
	// Merge is how values of the figure combine across minutes (rollup
	// tiers) and writers (deltas of batches), and how a result is taken
	// away again.
	Merge MergeKind
	// SQLite is where the SQLite store keeps it: a count's column in
	// the table of its scope, a histogram's value column in a table of
	// its own (the count in column HistCountColumn).
	SQLite Column
	// Stat is its code in the stat column (an Enum8) of the ClickHouse
	// rollups table: a row per figure, key and value, its count in n.
	Stat int8
	// Count returns the count of a TypeCount figure in the aggregate of
	// its scope; Hist the histogram of a histogram figure.
	Count func(Agg) *int64
	Hist  func(Agg) Hist
}

// Column is a SQLite table and column.
type Column struct{ Table, Column string }

// HistCountColumn is the column of a histogram figure's SQLite table that
// holds the count of each value.
const HistCountColumn = "n"

// Type is the type of a figure's value.
type Type uint8

// Types.
const (
	// TypeCount is an int64.
	TypeCount Type = iota + 1
	// TypeIntHist counts by int value (map[int]int64).
	TypeIntHist
	// TypeFloatHist counts by float64 value (map[float64]int64).
	TypeFloatHist
)

// Scope is what a figure is kept per: the aggregate of a Report it lives
// in and the key that finds it.
type Scope uint8

// Scopes. The Key fields that identify an aggregate of each are in
// brackets; a histogram scope adds the value counted.
const (
	ScopeTotals      Scope = iota // the Report itself []
	ScopeAPI                      // APIAgg [API]
	ScopeAPIHist                  // APIAgg's histograms [API]
	ScopeOwner                    // OwnerAgg [API, Service, Operation]
	ScopeOwnerHist                // OwnerAgg's histograms
	ScopeService                  // ServiceResult [Service]
	ScopeNode                     // NodeAgg [Service, Operation]
	ScopeVersion                  // VersionAgg [API, Service, Version]
	ScopeVersionHist              // VersionAgg's histograms
	numScopes
)

// Aggregate returns the scope of the aggregate a figure of s lives in: s
// without the histogram.
func (s Scope) Aggregate() Scope {
	switch s {
	case ScopeAPIHist, ScopeOwnerHist, ScopeVersionHist:
		return s - 1
	}
	return s
}

// Histogram reports whether the figures of s are histograms.
func (s Scope) Histogram() bool { return s != s.Aggregate() }

// PerAPI reports whether the aggregates of s are per root API (a query
// for one API reads only its own).
func (s Scope) PerAPI() bool {
	switch s.Aggregate() {
	case ScopeAPI, ScopeOwner, ScopeVersion:
		return true
	}
	return false
}

// Aggregates are the scopes of aggregates, in the order Report.Each and
// Merge visit them (an API before its owners).
var Aggregates = []Scope{ScopeTotals, ScopeAPI, ScopeOwner, ScopeService, ScopeNode, ScopeVersion}

// MergeKind is how a figure's values combine.
type MergeKind uint8

// Merge kinds.
const (
	// MergeSum adds values; taking a result away subtracts.
	MergeSum MergeKind = iota + 1
	// MergeHistogram adds the counts of each value.
	MergeHistogram
)

// Dialect is a store's SQL.
type Dialect uint8

// Dialects.
const (
	SQLite Dialect = iota
	ClickHouse
)

// mergeSQL is each merge kind's SQL: how a store's read sums the stored
// values of a figure ("{col}" is the figure's SQLite column), and how
// the SQLite upsert of a delta merges it into the stored row.
var mergeSQL = map[MergeKind]struct{ sqliteRead, sqliteUpsert, clickhouseRead string }{
	MergeSum:       {"sum({col})", "{col} = {col} + excluded.{col}", "sum(n)"},
	MergeHistogram: {"sum(n)", "n = n + excluded.n", "sum(n)"},
}

// Aggregate returns the SQL aggregate that reads the figure in dialect d,
// over the rows of a GROUP BY of its key (and value, for a histogram).
func (f *Figure) Aggregate(d Dialect) string {
	m := mergeSQL[f.Merge]
	if d == ClickHouse {
		return m.clickhouseRead
	}
	return strings.ReplaceAll(m.sqliteRead, "{col}", f.SQLite.Column)
}

// Upsert returns the SQLite assignment, in an upsert's DO UPDATE SET,
// that merges a delta into the stored value.
func (f *Figure) Upsert() string {
	return strings.ReplaceAll(mergeSQL[f.Merge].sqliteUpsert, "{col}", f.SQLite.Column)
}

// Agg is the aggregate of a Report a figure lives in: the field of its
// scope's aggregate is set.
type Agg struct {
	Report  *Report
	API     *APIAgg
	Owner   *OwnerAgg
	Service *ServiceResult
	Node    *NodeAgg
	Version *VersionAgg
}

// Key finds an aggregate of a scope in a Report (see the scopes for the
// fields each uses).
type Key struct {
	API, Service, Operation, Version string
}

// Hist is a histogram figure: counts by value, keyed by int (Ints) or by
// float64 (Floats), one of which is set. Values go through float64,
// which holds every int a histogram counts exactly.
type Hist struct {
	Ints   map[int]int64
	Floats map[float64]int64
}

// Add adds n to the count of v.
func (h Hist) Add(v float64, n int64) {
	if h.Ints != nil {
		h.Ints[int(v)] += n
	} else {
		h.Floats[v] += n
	}
}

// Each calls fn with every value and its count.
func (h Hist) Each(fn func(v float64, n int64)) {
	for v, n := range h.Ints {
		fn(float64(v), n)
	}
	for v, n := range h.Floats {
		fn(v, n)
	}
}

// Len returns the number of values counted.
func (h Hist) Len() int { return len(h.Ints) + len(h.Floats) }

func (h Hist) merge(o Hist, sign int64) {
	// One of the two is set: starting to range over the other, even nil,
	// is not free.
	if h.Ints != nil {
		addHist(h.Ints, o.Ints, sign)
	} else {
		addHist(h.Floats, o.Floats, sign)
	}
}

func (h Hist) dropZeros() {
	if h.Ints != nil {
		dropZeros(h.Ints)
	} else {
		dropZeros(h.Floats)
	}
}

// Add adds n to f in a: to its count, or to its histogram's count of
// value v (an int histogram's value is an int).
func (f *Figure) Add(a Agg, v float64, n int64) {
	if f.Count != nil {
		*f.Count(a) += n
	} else {
		f.Hist(a).Add(v, n)
	}
}

// zero reports whether f is zero (an empty histogram) in a.
func (f *Figure) zero(a Agg) bool {
	if f.Count != nil {
		return *f.Count(a) == 0
	}
	return f.Hist(a).Len() == 0
}

// figuresOf holds the figures of each aggregate scope, histograms
// included, in table order.
var figuresOf [numScopes][]*Figure

// countsOf and histsOf hold the accessors of the MergeSum and
// MergeHistogram figures of each aggregate scope.
var (
	countsOf [numScopes][]func(Agg) *int64
	histsOf  [numScopes][]func(Agg) Hist
)

// FiguresOf returns the figures kept in the aggregates of s (a scope of
// Aggregates): its counts and its histograms.
func FiguresOf(s Scope) []*Figure { return figuresOf[s] }

func init() {
	if err := checkFigures(Figures); err != nil {
		panic(err)
	}
	for i := range Figures {
		f := &Figures[i]
		s := f.Scope.Aggregate()
		figuresOf[s] = append(figuresOf[s], f)
		switch f.Merge {
		case MergeSum:
			countsOf[s] = append(countsOf[s], f.Count)
		case MergeHistogram:
			histsOf[s] = append(histsOf[s], f.Hist)
		}
	}
}

// checkFigures returns what is inconsistent in a table of figures: a
// figure's type, scope, merge and accessor must agree, and names,
// storage columns and stat codes must be unique.
func checkFigures(figs []Figure) error {
	names, cols, stats := map[string]bool{}, map[Column]bool{}, map[int8]bool{}
	tables := map[string]Scope{}
	for _, f := range figs {
		hist := f.Type == TypeIntHist || f.Type == TypeFloatHist
		switch {
		case f.Name == "" || names[f.Name]:
			return fmt.Errorf("analysis: figure %q: a name of its own is needed", f.Name)
		case cols[f.SQLite] || f.SQLite.Table == "" || f.SQLite.Column == "":
			return fmt.Errorf("analysis: figure %q: SQLite column %v is not its own", f.Name, f.SQLite)
		case stats[f.Stat]:
			return fmt.Errorf("analysis: figure %q: stat %d is taken", f.Name, f.Stat)
		case f.Scope >= numScopes, f.Type == TypeCount && (f.Count == nil || f.Hist != nil || f.Merge != MergeSum || f.Scope.Histogram()),
			hist && (f.Hist == nil || f.Count != nil || f.Merge != MergeHistogram || !f.Scope.Histogram()),
			!hist && f.Type != TypeCount:
			return fmt.Errorf("analysis: figure %q: type, scope, merge and accessor disagree", f.Name)
		}
		if s, ok := tables[f.SQLite.Table]; ok && (s != f.Scope || hist) {
			return fmt.Errorf("analysis: figure %q: table %s holds figures of another scope, or another histogram", f.Name, f.SQLite.Table)
		}
		names[f.Name], cols[f.SQLite], stats[f.Stat] = true, true, true
		tables[f.SQLite.Table] = f.Scope
	}
	return nil
}

// At returns the aggregate of scope s (any, histogram or not) at key k,
// created empty if needed.
func (r *Report) At(s Scope, k Key) Agg {
	switch s.Aggregate() {
	case ScopeTotals:
		return Agg{Report: r}
	case ScopeAPI:
		return Agg{API: r.API(k.API)}
	case ScopeOwner:
		return Agg{Owner: r.API(k.API).Owner(graph.Node{Service: k.Service, Operation: k.Operation})}
	case ScopeService:
		return Agg{Service: r.Service(k.Service)}
	case ScopeNode:
		return Agg{Node: r.Node(graph.Node{Service: k.Service, Operation: k.Operation})}
	case ScopeVersion:
		return Agg{Version: r.Version(VersionKey{API: k.API, Service: k.Service, Version: k.Version})}
	}
	panic(fmt.Sprintf("analysis: no scope %d", s))
}

// Each calls fn with every aggregate of scope s in r and its key.
func (r *Report) Each(s Scope, fn func(Key, Agg)) {
	switch s.Aggregate() {
	case ScopeTotals:
		fn(Key{}, Agg{Report: r})
	case ScopeAPI:
		for name, a := range r.APIs {
			fn(Key{API: name}, Agg{API: a})
		}
	case ScopeOwner:
		for name, a := range r.APIs {
			for n, o := range a.Owners {
				fn(Key{API: name, Service: n.Service, Operation: n.Operation}, Agg{Owner: o})
			}
		}
	case ScopeService:
		for name, v := range r.Services {
			fn(Key{Service: name}, Agg{Service: v})
		}
	case ScopeNode:
		for n, a := range r.Nodes {
			fn(Key{Service: n.Service, Operation: n.Operation}, Agg{Node: a})
		}
	case ScopeVersion:
		for k, v := range r.Versions {
			fn(Key{API: k.API, Service: k.Service, Version: k.Version}, Agg{Version: v})
		}
	}
}

// mergeAgg adds sign × src to dst, both aggregates of scope s.
func mergeAgg(s Scope, dst, src Agg, sign int64) {
	// The accessors by kind, read once in init: this runs for every
	// aggregate of every merge.
	for _, c := range countsOf[s] {
		*c(dst) += sign * *c(src)
	}
	for _, h := range histsOf[s] {
		h(dst).merge(h(src), sign)
	}
}

// zeroAgg drops the zero counts of a's histograms and reports whether
// every figure of a is zero.
func zeroAgg(s Scope, a Agg) bool {
	zero := true
	for _, f := range figuresOf[s] {
		if f.Hist != nil {
			f.Hist(a).dropZeros()
		}
		zero = zero && f.zero(a)
	}
	return zero
}
