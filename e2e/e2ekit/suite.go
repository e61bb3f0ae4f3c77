package e2ekit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultParallel sets -test.parallel to n unless the command line gave
// it: the suites' subtests mostly wait, so more of them than the machine
// has cores keeps a suite short. Call it in TestMain before m.Run.
func DefaultParallel(n int) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", fmt.Sprint(n))
	}
}

// Once is a suite's setup, done once for all its tests.
type Once struct {
	once sync.Once
	err  error
}

// Do runs build the first time it is called; a test whose setup failed
// fails with the reason.
func (o *Once) Do(t testing.TB, build func() error) {
	t.Helper()
	o.once.Do(func() { o.err = build() })
	if o.err != nil {
		t.Fatalf("setup: %v", o.err)
	}
}

// BuildCommands builds the stormradius module's commands cmd/NAME at repo
// into dir (as dir/NAME) while also runs: also builds the suite's cached
// program, whose cold build is the longer one (stormradius' mostly comes
// from the build cache). It returns the first error, once also is done.
func BuildCommands(repo, dir string, also func() error, names ...string) error {
	errc := make(chan error, 1)
	go func() { errc <- also() }()
	start := time.Now()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	if out, err := GoCmd(repo, args...).CombinedOutput(); err != nil {
		<-errc
		return fmt.Errorf("go build stormradius: %v\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", strings.Join(names, " and "), time.Since(start).Round(time.Millisecond))
	return <-errc
}

// EachGzipLine calls f with each line of the gzip-compressed file at path
// that is not blank, numbered from 1 among those, and stops at f's first
// error.
func EachGzipLine(path string, f func(n int, line []byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		return err
	}
	br := bufio.NewReader(zr)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			n++
			if ferr := f(n, line); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
