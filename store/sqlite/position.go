package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stormradius/stormradius/store"
)

// The write position (store.Store.Position) follows PRAGMA data_version
// of results.db, which SQLite changes on a connection whenever another
// connection commits to the file, and only then. A writable store reads it
// on its writer's connection (the pool of one): it then moves for other
// processes' commits only, this process's writes reporting themselves,
// with the minutes they touched (Wrote), so that the tier cache keeps the
// rest. A read-only store, which never commits, reads it on a reader
// connection of its own. Spans (spans.db) are not covered, as the
// contract says.

// positionConn pins the connection data_version is read on (under the
// tracker's lock): a value is only comparable with another read on the same
// connection, so a new connection gets a new epoch in the fingerprint.
type positionConn struct {
	conn  *sql.Conn
	epoch uint64
}

// readPosition returns results.db's fingerprint for the position tracker.
func (s *shared) readPosition(ctx context.Context) (uint64, error) {
	if !s.readOnly {
		var v int64
		if err := s.resW.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			return 0, unavailable(ctx, "read write position", err)
		}
		return uint64(v), nil
	}
	pc := &s.posConn
	if pc.conn == nil {
		c, err := s.resR.Conn(ctx)
		if err != nil {
			return 0, unavailable(ctx, "read write position", err)
		}
		pc.conn, pc.epoch = c, pc.epoch+1
	}
	var v int64
	if err := pc.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		// The next read takes another connection, in a new epoch.
		pc.conn.Close()
		pc.conn = nil
		return 0, unavailable(ctx, "read write position", err)
	}
	return pc.epoch<<40 ^ uint64(v), nil
}

// closePosition returns the pinned connection to the pool before it is
// closed.
func (s *shared) closePosition() {
	s.pos.Do(func() {
		if s.posConn.conn != nil {
			s.posConn.conn.Close()
			s.posConn.conn = nil
		}
	})
}

// Position returns the store's write position (store.Store.Position).
func (s *Store) Position(ctx context.Context) (uint64, error) {
	if s.resR == nil {
		return 0, fmt.Errorf("sqlite: position: %w", store.ErrClosed)
	}
	return s.pos.Position(ctx)
}
