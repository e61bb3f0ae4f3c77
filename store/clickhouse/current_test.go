package clickhouse

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/internal/chtest"
)

// TestCurrentEngine runs the store's tests on a current ClickHouse engine
// over clickhouse-go's HTTP protocol: chdb, served as ClickHouse's HTTP
// interface serves (scripts/chdbhttp; scripts/chdb-serve.sh start prints
// STORMRADIUS_TEST_CLICKHOUSE_CURRENT for it), skipping without one. Each
// runs as it does on STORMRADIUS_CLICKHOUSE's server, in databases of its
// own there (onServer); TestCurrentEngineService and
// TestCurrentEngineOutage run the service on it too.
//
// Every test of the package that needs a server and no cluster is here.
// Not here: the cluster's (TestCluster, TestServiceOnCluster), as chdb is
// one engine embedded in one process that serves no other server: it has
// no remote_servers (ON CLUSTER: "Requested cluster 'stormradius_test' not
// found"), no ZooKeeper or Keeper ("Can't create replicated table without
// ZooKeeper") and no macros; scripts/chdb-check.sh parses cluster mode's
// statements there instead, and scripts/chcluster.sh runs them on 18.16.
// Nor TestOverHTTP and TestHTTPNeedsCurrentServer, which are about 18.16,
// nor the benchmarks (docs/clickhouse-current.md).
func TestCurrentEngine(t *testing.T) {
	onServer(t, chtest.Current(t))
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"Conformance", TestConformance},
		{"LeaseConformance", TestLeaseConformance},
		{"WindowRecordsByEdges", TestWindowRecordsByEdges},
		{"WindowRecorded", TestWindowRecorded},
		{"MigrationsDryRun", TestMigrationsDryRun},
		{"Unavailable", TestUnavailable},
		{"StateExactness", TestStateExactness},
		{"RollupTiers", TestRollupTiers},
		{"RetentionDropsPartitions", TestRetentionDropsPartitions},
		{"IncidentsAgreeWithSQLite", TestIncidentsAgreeWithSQLite},
		{"RollupRepair", TestRollupRepair},
		{"RollupLateLanding", TestRollupLateLanding},
		{"StateAfterStoppedApply", TestStateAfterStoppedApply},
		{"FiguresSchema", TestFiguresSchema},
		{"OverlappingSpanWrites", TestOverlappingSpanWrites},
		{"PartitionsRepairConcurrently", TestPartitionsRepairConcurrently},
		{"PartitionMoveRepair", TestPartitionMoveRepair},
		{"MigrateToPartitions", TestMigrateToPartitions},
		{"PartitionLeaseFence", TestPartitionLeaseFence},
		{"PartitionsHotMinutes", TestPartitionsHotMinutes},
		{"ReadOnlyNeedsMigratedSchema", TestReadOnlyNeedsMigratedSchema},
		{"ReadOnlyRefusesWrites", TestReadOnlyRefusesWrites},
		{"TraceStamps", TestTraceStamps},
		{"SummaryFormats", TestSummaryFormats},
		{"Tables", TestTables},
		{"HeldMinutes", TestHeldMinutes},
		{"LastMinuteHint", TestLastMinuteHint},
		{"HoldExpires", TestHoldExpires},
		{"TrimChanges", TestTrimChanges},
		{"ChunkedInsertOnePart", TestChunkedInsertOnePart},
	} {
		t.Run(tc.name, tc.test)
	}
}

// TestCurrentEngineListsEveryTest: every test of the package that calls
// server, writerReader or freshDatabase (a test on the server without a
// cluster) runs in TestCurrentEngine, or is one of those named above as
// not run there, so that a new test cannot miss the current engine.
func TestCurrentEngineListsEveryTest(t *testing.T) {
	src, err := os.ReadFile("current_test.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"TestOverHTTP": true, "TestHTTPNeedsCurrentServer": true,
		"TestServiceOnClickHouse": true, "TestOutage": true} // the last two: TestCurrentEngineService, TestCurrentEngineOutage
	for _, m := range regexp.MustCompile(`\{"\w+", (Test\w+)\}`).FindAllSubmatch(src, -1) {
		listed[string(m[1])] = true
	}
	files, _ := filepath.Glob("*_test.go")
	fs := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fs, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || strings.HasPrefix(fn.Name.Name, "TestCluster") {
				continue
			}
			uses := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && (id.Name == "server" || id.Name == "writerReader" || id.Name == "freshDatabase") {
						uses = true
					}
				}
				return true
			})
			if uses && !listed[fn.Name.Name] {
				t.Errorf("%s: %s runs on the test server but not on the current engine: add it to TestCurrentEngine", name, fn.Name.Name)
			}
		}
	}
}
