package chtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A skip is only in t.Skip's message, which go test prints with -v alone:
// in package-list mode (go test ./...) the go command keeps a passing
// package's output to itself, TestMain's included, so a run whose
// ClickHouse tests all skipped would look as green as one that ran them.
// The note below says so where the person running go test reads: once
// per go command run, however many packages skip.

// markerPrefix starts the names of the files in os.TempDir that say a
// suite's note was written during one go command run.
const markerPrefix = "stormradius-chtest-"

// markerAge is how old a marker is before any later note removes it.
const markerAge = 24 * time.Hour

// announce writes line, once per go command run and suite, to the go
// command's standard error or else the terminal, and keeps this test
// binary's result out of the go command's cache when the suite says so.
// Call it from a test (the go command sees what tests read, not what
// TestMain does).
func (s *suite) announce(line string) {
	if s.uncached {
		doNotCache()
	}
	s.noted.Do(func() {
		if !firstInRun(os.TempDir(), s.env) {
			return
		}
		if w := noteWriter(); w != nil {
			fmt.Fprintf(w, "stormradius: %s\n", line)
			w.Close()
		}
	})
}

// firstInRun reports whether this is the first call for name in this go
// command run (os.Getppid, the go command, running the package's test
// binaries one process each), by creating a marker file in dir. When the
// marker cannot be made it says true: a note twice beats none.
func firstInRun(dir, name string) bool {
	removeOldMarkers(dir)
	f, err := os.OpenFile(filepath.Join(dir, markerPrefix+runKey()+"-"+name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false
	}
	if err == nil {
		f.Close()
	}
	return true
}

// runKey names this go command run: its process id and, where /proc says
// it, when the process started (process ids are reused).
func runKey() string {
	ppid := os.Getppid()
	key := strconv.Itoa(ppid)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ppid))
	if err != nil {
		return key
	}
	// The fields after the command's name, which is in parentheses and
	// may hold anything (parentheses too); the start time is the 22nd
	// field, the 20th of these.
	i := strings.LastIndex(string(stat), ") ")
	if i < 0 {
		return key
	}
	if f := strings.Fields(string(stat[i+2:])); len(f) > 19 {
		key += "-" + f[19]
	}
	return key
}

// removeOldMarkers removes the markers of runs that ended long ago.
func removeOldMarkers(dir string) {
	old, _ := filepath.Glob(filepath.Join(dir, markerPrefix+"*"))
	for _, p := range old {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > markerAge {
			os.Remove(p)
		}
	}
}

// noteWriter opens where the person running go test reads: the go
// command's standard error when it is a terminal or a pipe (through
// /proc), else the controlling terminal; nil when neither opens. A
// regular file the go command writes is left alone: a second writer with
// an offset of its own could overwrite the go command's lines.
func noteWriter() *os.File {
	stderr := fmt.Sprintf("/proc/%d/fd/2", os.Getppid())
	if fi, err := os.Stat(stderr); err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0 {
		if f, err := os.OpenFile(stderr, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			return f
		}
	}
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return f
	}
	return nil
}

// doNotCache keeps the go command from caching the result of this test
// binary, so that a later go test runs the tests again, finds the server
// started in between, or writes the note again. The go command caches a
// result under the environment variables and the module's files the
// tests read; whether a server answered is neither, so a skip would be
// replayed as a quiet "(cached)" ok. A path read that resolves into the
// module only while this go command runs does it: the go command's
// working directory through /proc (a test's reads outside the module are
// not inputs; once the go command exits the path resolves to nothing and
// the recorded input is missing from every later run's). It takes the go
// command working in the module, as go test ./... does; elsewhere, or
// without /proc, results are cached as before and -count=1 runs them
// again.
func doNotCache() {
	os.Stat(fmt.Sprintf("/proc/%d/cwd", os.Getppid()))
}
