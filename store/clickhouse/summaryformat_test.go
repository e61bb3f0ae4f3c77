package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/stormradius/stormradius/store/storetest"
)

// Summaries are written in the binary form (any bytes go in a String
// column); a row in another form is corrupt.
func TestSummaryFormats(t *testing.T) {
	s := open(t, freshDatabase(t, server(t)), time.Hour)
	defer s.Close()
	ctx := context.Background()
	put := func(win int64, b []byte) error {
		defer s.sumGen.Add(1) // as PutSummaries: the summaries kept are read again
		return s.insert(ctx, "put old summary", "summaries", []string{"day", "win", "version", "summary"},
			[]time.Time{dayDate(dayOf(win * int64(time.Hour)))}, []int64{win}, []uint64{s.versions(1)}, []string{string(b)})
	}
	read := func(win int64) ([]byte, error) {
		var b []byte
		err := s.queryRow(ctx, "read summary", `SELECT summary FROM summaries FINAL WHERE win = `+itoa(win), &b)
		return b, err
	}
	storetest.SummaryFormats(t, s, put, read)
}
