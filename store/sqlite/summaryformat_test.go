package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/store/storetest"
)

// Summaries are written in the binary form; a row in another form, or a
// truncated one, is an error.
func TestSummaryFormats(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(win int64, b []byte) error {
		_, err := s.resW.ExecContext(ctx, `INSERT OR REPLACE INTO summaries (win, summary) VALUES (?, ?)`, win, b)
		return err
	}
	read := func(win int64) ([]byte, error) {
		var b []byte
		err := s.resR.QueryRowContext(ctx, `SELECT summary FROM summaries WHERE win = ?`, win).Scan(&b)
		return b, err
	}
	storetest.SummaryFormats(t, s, put, read)
	// A corrupt row is an error, not a panic.
	b, err := read(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := put(12, b[:len(b)-2]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summaries(ctx, 12, 12); err == nil {
		t.Fatal("a truncated summary read")
	}
}
