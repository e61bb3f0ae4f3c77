package sqlite_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stormradius/stormradius/store/sqlite"
	"github.com/stormradius/stormradius/store/storetest"
)

// Spans are user data: under the common umask 022 (which made them 0644)
// a new data directory is 0700 and every file of the store 0600, the -wal
// and -shm files SQLite creates included; a directory that exists keeps
// the mode its owner gave it.
func TestFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	c := storetest.NewCorpus(t, 20, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Second)

	// perms returns the mode of each entry of dir, and checks that it holds
	// both databases and their -wal and -shm files.
	perms := func(dir string) map[string]fs.FileMode {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]fs.FileMode{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = info.Mode()
		}
		for _, db := range []string{"spans.db", "results.db"} {
			for _, name := range []string{db, db + "-wal", db + "-shm"} {
				if _, ok := out[name]; !ok {
					t.Errorf("%s: no %s among %v", dir, name, out)
				}
			}
		}
		return out
	}
	write := func(dir string) *sqlite.Store {
		t.Helper()
		s, err := sqlite.Open(ctx, sqlite.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range c.Spans {
			if _, err := s.WriteSpans(ctx, sp); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	mode := func(path string) fs.FileMode {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode()
	}

	root := t.TempDir()
	dir := filepath.Join(root, "new", "data")
	s := write(dir)
	for _, d := range []string{filepath.Join(root, "new"), dir} {
		if m := mode(d); m != fs.ModeDir|0o700 {
			t.Errorf("%s: %v, want drwx------", d, m)
		}
	}
	for name, m := range perms(dir) {
		if m != 0o600 {
			t.Errorf("%s: %v, want -rw-------", name, m)
		}
	}
	s.Close()
	s = write(dir) // again: the -wal and -shm files are created anew
	for name, m := range perms(dir) {
		if m != 0o600 {
			t.Errorf("reopened: %s: %v, want -rw-------", name, m)
		}
	}
	s.Close()

	// A directory the user made, group-readable: kept as it is; the
	// store's files in it private.
	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o750); err != nil {
		t.Fatal(err)
	}
	s = write(shared)
	defer s.Close()
	if m := mode(shared); m != fs.ModeDir|0o750 {
		t.Errorf("the user's directory became %v, want drwxr-x---", m)
	}
	got := perms(shared)
	for name, m := range got {
		if m != 0o600 {
			t.Errorf("%s in the user's directory: %v, want -rw-------", name, m)
		}
	}
	if len(got) != 6 {
		t.Errorf("the store made %v, want its two databases with their -wal and -shm", got)
	}
}
