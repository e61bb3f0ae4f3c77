package offline_test

import (
	"context"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/offline"
	"github.com/stormradius/stormradius/store/storetest"
)

// analyze's spill files hold the spans: under the common umask 022 they
// are 0600 while they exist, and gone once Analyze returns.
func TestSpillFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	c := storetest.NewCorpus(t, 50, time.Date(2026, 3, 1, 9, 55, 0, 0, time.UTC), time.Second)
	dir := t.TempDir()
	modes := map[string]fs.FileMode{}
	read := func(emit func([]graph.Span) error) error {
		for _, sp := range c.Spans {
			if err := emit(sp); err != nil {
				return err
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				return err
			}
			modes[e.Name()] = info.Mode()
		}
		return nil
	}
	if _, _, _, err := offline.Analyze(context.Background(), read, offline.Config{Analysis: analysis.Config{Window: 10 * time.Minute},
		MaxPendingSpans: 50, TempDir: dir}); err != nil {
		t.Fatal(err)
	}
	if len(modes) == 0 {
		t.Fatal("no spill file in the temporary directory while reading")
	}
	for name, m := range modes {
		if m != 0o600 {
			t.Errorf("spill file %s: %v, want -rw-------", name, m)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("spill files left behind: %v", left)
	}
}
