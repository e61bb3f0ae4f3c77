package clickhouse

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHoldExpires: an intent whose writer never announces it done (a
// writer that died) holds its minutes for holdMax, then releases them,
// dropping them once more.
func TestHoldExpires(t *testing.T) {
	dsn, _, r := writerReader(t)
	r.feed.holdMax = 700 * time.Millisecond
	o := open(t, dsn, time.Hour)
	defer o.Close()
	x := context.Background()
	c := change{lo: 1000, hi: 1003}
	if err := o.announce(x, kindIntent, 1, c); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !r.feed.isHeld(1002, 1003) {
		if time.Now().After(deadline) {
			t.Fatal("an intent of another writer is not held")
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := r.Position(x); err != nil {
			t.Fatal(err)
		}
	}
	if r.feed.isHeld(1003, 1010) || r.feed.isHeld(990, 1000) {
		t.Error("minutes outside the intent's are held")
	}
	pos, err := r.Position(x)
	if err != nil {
		t.Fatal(err)
	}
	for r.feed.isHeld(1000, 1003) {
		if time.Now().After(deadline) {
			t.Fatal("an intent without its done row still holds after holdMax")
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := r.Position(x); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := r.Position(x); p == pos {
		t.Error("an intent's expiry did not move the position (what it held is dropped again)")
	}
}

// TestTrimChanges: the change log keeps today and yesterday; older days
// go at the writer's next trim.
func TestTrimChanges(t *testing.T) {
	_, w, _ := writerReader(t)
	x := context.Background()
	count := func(cond string) (n uint64) {
		t.Helper()
		if err := w.queryRow(x, "count", `SELECT count() FROM changes WHERE `+cond, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	today := dayOf(time.Now().UnixNano())
	for _, d := range []int64{today - 5, today - 2, today - 1} {
		at := d*nsPerDay + 1
		if err := w.insert(x, "old change", "changes", changeColumns, []time.Time{dayDate(d)}, []int64{at}, []string{"gone"},
			[]uint64{1}, []uint8{kindDone}, []int64{0}, []int64{0}, []int64{0}, []int64{0}, []uint8{0}, []uint8{0}, [][]uint16{{}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.announce(x, kindDone, 1, change{}); err != nil {
		t.Fatal(err)
	}
	if err := w.trimChanges(x); err != nil {
		t.Fatal(err)
	}
	if n := count(`day < '` + dayDate(today-1).Format(time.DateOnly) + `'`); n != 0 {
		t.Errorf("%d rows of days before yesterday kept", n)
	}
	if n := count(`day >= '` + dayDate(today-1).Format(time.DateOnly) + `'`); n != 2 {
		t.Errorf("%d rows of today and yesterday, want 2", n)
	}
}

// TestNoBlockNumbers: no answer of the store depends on how its tables
// are cut into parts. Its code names no block number or part (_part),
// and lists parts (system.parts) only for maintenance: which day
// partitions Compact merges, which days retention and the change log's
// trim drop.
func TestNoBlockNumbers(t *testing.T) {
	allowed := map[string]bool{"splitDays": true, "trimChanges": true, "deleteBefore": true, "partsSource": true}
	files, _ := filepath.Glob("*.go")
	fs := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fs, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			name := "a declaration" // constants and variables: never allowed
			if fn, ok := d.(*ast.FuncDecl); ok {
				name = fn.Name.Name
			}
			ast.Inspect(d, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.BasicLit:
					if x.Kind == token.STRING && (strings.Contains(x.Value, "block_number") || partColumn.MatchString(x.Value) ||
						strings.Contains(x.Value, "system.parts") && !allowed[name]) {
						t.Errorf("%s: %s reads parts: %s", fs.Position(x.Pos()), name, x.Value)
					}
				case *ast.CallExpr:
					if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "partsSource" && !allowed[name] {
						t.Errorf("%s: %s lists parts", fs.Position(x.Pos()), name)
					}
				}
				return true
			})
		}
	}
}

// partColumn is the virtual column naming a row's part.
var partColumn = regexp.MustCompile(`(^|[^A-Za-z0-9_])_part([^A-Za-z0-9_]|$)`)
