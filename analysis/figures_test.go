package analysis

import (
	"reflect"
	"testing"
)

// The stored location of every figure, copied by hand from the
// migrations (schema/sqlite/results/0001 and 0004, schema/clickhouse/0006):
// these are on disk, so reordering or editing Figures must not change
// them.
var pinned = map[string]struct {
	scope         Scope
	table, column string
	stat          int8
}{
	"spans":                {ScopeTotals, "rollup_totals", "spans", 0},
	"traces":               {ScopeTotals, "rollup_totals", "traces", 1},
	"fragments":            {ScopeTotals, "rollup_totals", "fragments", 2},
	"api_traces":           {ScopeAPI, "rollup_api", "traces", 10},
	"api_failed":           {ScopeAPI, "rollup_api", "failed", 11},
	"api_root_errors":      {ScopeAPI, "rollup_api", "root_errors", 12},
	"api_remote_parent":    {ScopeAPI, "rollup_api", "remote_parent", 13},
	"api_radius_sum":       {ScopeAPI, "rollup_api", "radius_sum", 14},
	"api_suppressed":       {ScopeAPI, "rollup_api", "suppressed", 15},
	"api_hops":             {ScopeAPI, "rollup_api", "hops", 16},
	"api_counterfactual":   {ScopeAPI, "rollup_api", "counterfactual", 17},
	"api_misattributed":    {ScopeAPI, "rollup_api", "misattributed", 18},
	"api_naive":            {ScopeAPI, "rollup_api", "naive", 19},
	"api_eligible":         {ScopeAPI, "rollup_api", "eligible", 20},
	"api_fragments":        {ScopeAPI, "rollup_api", "fragments", 21},
	"api_events":           {ScopeAPI, "rollup_api", "events", 22},
	"radius":               {ScopeAPIHist, "rollup_radius", "radius", 30},
	"amp":                  {ScopeAPIHist, "rollup_amp", "amp", 31},
	"owner_events":         {ScopeOwner, "rollup_owner", "events", 40},
	"owner_spurious":       {ScopeOwner, "rollup_owner", "spurious", 41},
	"owner_traces":         {ScopeOwner, "rollup_owner", "traces", 42},
	"owner_suppressed":     {ScopeOwner, "rollup_owner", "suppressed", 43},
	"owner_radius_sum":     {ScopeOwner, "rollup_owner", "radius_sum", 44},
	"owner_radius":         {ScopeOwnerHist, "rollup_owner_radius", "radius", 45},
	"owner_amp":            {ScopeOwnerHist, "rollup_owner_amp", "amp", 46},
	"svc_correct":          {ScopeService, "rollup_service", "correct", 50},
	"svc_false_claim":      {ScopeService, "rollup_service", "false_claim", 51},
	"svc_false_unclaim":    {ScopeService, "rollup_service", "false_unclaim", 52},
	"svc_missing":          {ScopeService, "rollup_service", "missing", 53},
	"svc_invalid":          {ScopeService, "rollup_service", "invalid", 54},
	"svc_mismatches":       {ScopeService, "rollup_service", "mismatches", 55},
	"svc_misattributed":    {ScopeService, "rollup_service", "misattributed", 56},
	"svc_naive":            {ScopeService, "rollup_service", "naive", 57},
	"svc_eligible":         {ScopeService, "rollup_service", "eligible", 58},
	"svc_context_drops":    {ScopeService, "rollup_service", "context_drops", 59},
	"svc_owned":            {ScopeService, "rollup_service", "owned", 60},
	"svc_requests":         {ScopeService, "rollup_service", "requests", 61},
	"svc_virtual_requests": {ScopeService, "rollup_service", "virtual_requests", 62},
	"svc_counterfactual":   {ScopeService, "rollup_service", "counterfactual", 63},
	"svc_spurious":         {ScopeService, "rollup_service", "spurious", 64},
	"node_requests":        {ScopeNode, "rollup_node", "requests", 70},
	"node_owned":           {ScopeNode, "rollup_node", "owned", 71},
	"ver_traces":           {ScopeVersion, "rollup_version", "traces", 80},
	"ver_failed":           {ScopeVersion, "rollup_version", "failed", 81},
	"ver_root_errors":      {ScopeVersion, "rollup_version", "root_errors", 82},
	"ver_radius_sum":       {ScopeVersion, "rollup_version", "radius_sum", 83},
	"ver_radius":           {ScopeVersionHist, "rollup_version_radius", "radius", 84},
	"ver_amp":              {ScopeVersionHist, "rollup_version_amp", "amp", 85},
	// schema/sqlite/results/0010 and schema/clickhouse/0014 (sampling):
	"traces_excess":      {ScopeTotals, "rollup_totals", "traces_excess", 3},
	"spans_excess":       {ScopeTotals, "rollup_totals", "spans_excess", 4},
	"traces_var":         {ScopeTotals, "rollup_totals", "traces_var", 5},
	"sampling_conflicts": {ScopeTotals, "rollup_totals", "sampling_conflicts", 6},
	"sampling_unusable":  {ScopeTotals, "rollup_totals", "sampling_unusable", 7},
	"traces_split":       {ScopeTotals, "rollup_totals", "traces_split", 8},
	"api_excess":         {ScopeAPI, "rollup_api", "excess", 23},
	"api_var":            {ScopeAPI, "rollup_api", "var", 24},
	"api_var_failed":     {ScopeAPI, "rollup_api", "var_failed", 25},
	"api_var_root":       {ScopeAPI, "rollup_api", "var_root", 26},
	"api_var_radius":     {ScopeAPI, "rollup_api", "var_radius", 27},
	"api_var_radius2":    {ScopeAPI, "rollup_api", "var_radius2", 28},
	"api_var_mis2":       {ScopeAPI, "rollup_api", "var_mis2", 32},
	"api_var_mis_elig":   {ScopeAPI, "rollup_api", "var_mis_elig", 33},
	"api_var_elig2":      {ScopeAPI, "rollup_api", "var_elig2", 34},
	"ver_excess":         {ScopeVersion, "rollup_version", "excess", 86},
	"ver_var":            {ScopeVersion, "rollup_version", "var", 87},
	"api_tail_clean_16":  {ScopeAPI, "rollup_api", "tail_clean_16", 90},
	"api_tail_clean_2":   {ScopeAPI, "rollup_api", "tail_clean_2", 91},
	"api_tail_clean":     {ScopeAPI, "rollup_api", "tail_clean", 92},
	"api_tail_failed_2":  {ScopeAPI, "rollup_api", "tail_failed_2", 93},
	"api_tail_failed":    {ScopeAPI, "rollup_api", "tail_failed", 94},
	// schema/sqlite/results/0012 and schema/clickhouse/0017 (the rollout
	// gate's claim checks):
	"ver_failed_hops":       {ScopeVersion, "rollup_version", "failed_hops", 100},
	"ver_claimed_hops":      {ScopeVersion, "rollup_version", "claimed_hops", 101},
	"ver_unclaimed_answers": {ScopeVersion, "rollup_version", "unclaimed_answers", 102},
	"ver_retried_unclaimed": {ScopeVersion, "rollup_version", "retried_unclaimed", 103},
	"ver_suppressed":        {ScopeVersion, "rollup_version", "suppressed", 104},
}

func TestFiguresPinned(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Figures {
		p, ok := pinned[f.Name]
		if !ok {
			// A new figure: its stored place is new too, and pinned here
			// once its migration exists.
			t.Errorf("figure %s is not pinned: add its stored place to pinned", f.Name)
			continue
		}
		seen[f.Name] = true
		if f.Scope != p.scope || f.SQLite != (Column{p.table, p.column}) || f.Stat != p.stat {
			t.Errorf("figure %s: scope %d, SQLite %v, stat %d; on disk: scope %d, %s.%s, stat %d",
				f.Name, f.Scope, f.SQLite, f.Stat, p.scope, p.table, p.column, p.stat)
		}
	}
	for name := range pinned {
		if !seen[name] {
			t.Errorf("stored figure %s has no entry in Figures", name)
		}
	}
}

// Every count and histogram field of a report's aggregates is reached by
// exactly one figure's accessor: a field without a figure would be lost
// by Merge and by the stores.
func TestFiguresCoverAggregates(t *testing.T) {
	r := NewReport()
	k := Key{API: "a", Service: "s", Operation: "o", Version: "v"}
	aggs := map[Scope]any{}
	for _, s := range Aggregates {
		a := r.At(s, k)
		aggs[s] = map[Scope]any{ScopeTotals: a.Report, ScopeAPI: a.API, ScopeOwner: a.Owner, ScopeService: a.Service,
			ScopeNode: a.Node, ScopeVersion: a.Version}[s]
	}
	// Each figure's accessor, given distinct values, must land in a field
	// of its own.
	reached := map[string]string{} // field path → figure
	for _, s := range Aggregates {
		before := snapshot(aggs[s])
		for i, f := range FiguresOf(s) {
			a := r.At(s, k)
			if f.Count != nil {
				*f.Count(a) = int64(1000 + i)
			} else {
				f.Hist(a).Add(float64(i+1), 1)
			}
			after := snapshot(aggs[s])
			var changed []string
			for path, v := range after {
				if before[path] != v {
					changed = append(changed, path)
				}
			}
			if len(changed) != 1 {
				t.Errorf("figure %s changed fields %v, want one", f.Name, changed)
				continue
			}
			path := reflect.TypeOf(aggs[s]).String() + "." + changed[0]
			if other, ok := reached[path]; ok {
				t.Errorf("figures %s and %s both reach %s", other, f.Name, path)
			}
			reached[path] = f.Name
			before = after
		}
		for path := range before {
			if _, ok := reached[reflect.TypeOf(aggs[s]).String()+"."+path]; !ok {
				t.Errorf("field %s of %T is no figure", path, aggs[s])
			}
		}
	}
}

// snapshot returns the int64 fields (array elements but the first included) and the
// histogram maps' sizes of the struct p points to, by field path.
// Strings and nested aggregates (an API's owners, the report's maps of
// aggregates) are keys, not figures.
func snapshot(p any) map[string]int64 {
	out := map[string]int64{}
	v := reflect.ValueOf(p).Elem()
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.Int64:
			out[name] = f.Int()
		case f.Kind() == reflect.Array && f.Type().Elem().Kind() == reflect.Int64:
			// Claims[AuditNone] counts no verdict (an audit never
			// returns it): nothing to keep.
			for j := 1; j < f.Len(); j++ {
				out[name+"["+string(rune('0'+j))+"]"] = f.Index(j).Int()
			}
		case f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.Int64:
			out[name] = int64(f.Len())
		}
	}
	return out
}

// The table's own consistency check refuses what would corrupt stores.
func TestCheckFigures(t *testing.T) {
	if err := checkFigures(Figures); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(f []Figure){
		"duplicate stat":     func(f []Figure) { f[4].Stat = f[3].Stat },
		"duplicate column":   func(f []Figure) { f[4].SQLite = f[3].SQLite },
		"duplicate name":     func(f []Figure) { f[4].Name = f[3].Name },
		"count as histogram": func(f []Figure) { f[4].Merge = MergeHistogram },
		"histogram in a table of counts": func(f []Figure) {
			for i := range f {
				if f[i].Name == "radius" {
					f[i].SQLite.Table = "rollup_api"
				}
			}
		},
	} {
		figs := append([]Figure(nil), Figures...)
		mutate(figs)
		if checkFigures(figs) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Each merge kind's SQL, as the stores run it.
func TestFigureSQL(t *testing.T) {
	byName := map[string]*Figure{}
	for i := range Figures {
		byName[Figures[i].Name] = &Figures[i]
	}
	for _, c := range []struct {
		name                       string
		sqlite, upsert, clickhouse string
	}{
		{"api_radius_sum", "sum(radius_sum)", "radius_sum = radius_sum + excluded.radius_sum", "sum(n)"},
		{"owner_amp", "sum(n)", "n = n + excluded.n", "sum(n)"},
	} {
		f := byName[c.name]
		if got := f.Aggregate(SQLite); got != c.sqlite {
			t.Errorf("%s: SQLite aggregate %q, want %q", c.name, got, c.sqlite)
		}
		if got := f.Upsert(); got != c.upsert {
			t.Errorf("%s: upsert %q, want %q", c.name, got, c.upsert)
		}
		if got := f.Aggregate(ClickHouse); got != c.clickhouse {
			t.Errorf("%s: ClickHouse aggregate %q, want %q", c.name, got, c.clickhouse)
		}
	}
}

// ServiceResult.merge, written out for Report.Add, adds exactly the
// service figures of Figures: what mergeAgg derives from the table, every
// figure and nothing else (a claim verdict no figure holds stays).
func TestServiceMergeIsFigures(t *testing.T) {
	var o ServiceResult
	for i, f := range FiguresOf(ScopeService) {
		*f.Count(Agg{Service: &o}) = int64(i + 1)
	}
	for i := range o.Claims {
		if o.Claims[i] == 0 {
			o.Claims[i] = 100 + int64(i) // verdicts no figure holds
		}
	}
	got, want := ServiceResult{Service: "s"}, ServiceResult{Service: "s"}
	got.merge(&o, 3)
	mergeAgg(ScopeService, Agg{Service: &want}, Agg{Service: &o}, 3)
	if got != want {
		t.Fatalf("merge gives\n%+v\nmergeAgg (the table)\n%+v", got, want)
	}
	if n := len(FiguresOf(ScopeService)); n != 15 || want.Spurious == 0 {
		t.Fatalf("%d service figures, spurious %d: the test sets none", n, want.Spurious)
	}
}
