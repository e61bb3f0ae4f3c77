package pipeline

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/graph"
	"github.com/stormradius/stormradius/store"
)

// One partition of several (docs/ARCHITECTURE.md, "Scaling out"). Every
// trace belongs to one partition, so a partition's analyser owns its
// traces, their records and its part of each window's state. A trace is
// evaluated against the whole window, though: the window state in memory
// is the partition's own part plus the parts the other partitions stored
// (analyser.peers), read when the window is loaded and every PeerRefresh
// after. A refresh that changes an edge's class (fail-open, retry-enabled,
// M_e) evaluates again this partition's records that use the edge, exactly
// as a flip caused by its own traces does; the other partitions do the
// same for theirs. Once every partition is quiet and has refreshed, each
// record has been evaluated against the sum of every partition's part —
// the window state one analyser of all the traces has — so the stored
// results, and the rollups summed from them, equal a single analyser's.

// peerLookback is how far back a refresh asks which windows the other
// partitions wrote: further than the writers' clocks may disagree, and
// than a refresh may take.
const peerLookback = time.Minute

// ownState returns a copy of this partition's part of window w's state
// (the whole window in memory less the other partitions' part), what a
// store batch stores; empty when the window holds nothing.
func (a *analyser) ownState(w int64) *analysis.State {
	st := a.windows.State(w)
	if st == nil {
		return analysis.NewState() // emptied: the store drops it
	}
	own := st.Clone()
	if pe := a.peers[w]; pe != nil {
		own.Merge(pe, -1)
	}
	return own
}

// addPeers adds to st, window w's own part, the other partitions' part
// (partitions only).
func (a *analyser) addPeers(ctx context.Context, w int64, st *analysis.State) error {
	if a.p.peers == nil {
		return nil
	}
	pe, err := a.p.peers.PeerState(ctx, w)
	if err != nil {
		return err
	}
	st.Merge(pe, 1)
	a.peers[w] = pe
	return nil
}

// forget drops window w from memory: it is loaded from the store again
// when next touched.
func (a *analyser) forget(w int64) {
	a.windows.Drop(w)
	delete(a.touched, w)
	delete(a.peers, w)
	delete(a.recheck, w)
}

// refreshPeers reads the other partitions' parts of the windows in memory
// and of those they wrote lately, and evaluates again this partition's
// records that a changed edge class made stale, in one store batch. A
// window this partition has records in but not in memory (evicted, or
// never loaded since a restart) is loaded and all its records evaluated
// again: what they were evaluated against is not known.
func (a *analyser) refreshPeers(ctx context.Context) error {
	since := a.peerSince
	if since.IsZero() {
		// At start: the windows this partition's last owner may not have
		// seen the others write (it refreshed until it stopped).
		since = time.Now().Add(-2 * peerLookback)
	}
	next := time.Now().Add(-peerLookback)
	written, err := a.p.peers.PeerWindows(ctx, since.UnixNano())
	if err != nil {
		return err
	}
	ws := a.windows.Indexes()
	for w := range a.recheck {
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	for _, w := range written {
		if !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		a.peerSince = next
		return nil
	}
	// The records of the batch in flight must be stored before they are
	// read back and evaluated again.
	if err := a.finish(ctx); err != nil {
		return err
	}
	var changes []store.Change
	touched := map[int64]bool{}
	for _, w := range ws {
		var err error
		if changes, err = a.refreshWindow(ctx, w, touched, changes); err != nil {
			for w := range touched {
				a.forget(w)
			}
			return err
		}
	}
	if len(changes) > 0 {
		states := make(map[int64]*analysis.State, len(touched))
		for w := range touched {
			states[w] = a.ownState(w)
		}
		if err := a.p.st.Apply(ctx, store.Batch{Changes: changes, States: states}); err != nil {
			for w := range touched {
				a.forget(w)
				a.suspect[w], a.dirty[w] = true, true
			}
			return err
		}
	}
	a.peerSince = next
	return nil
}

// refreshWindow brings window w's other partitions' part up to date (see
// refreshPeers), appending the changes of the records that go stale; it
// notes in touched the windows whose records it evaluated again.
func (a *analyser) refreshWindow(ctx context.Context, w int64, touched map[int64]bool, changes []store.Change) ([]store.Change, error) {
	st := a.windows.State(w)
	loaded := st == nil
	if loaded {
		if _, _, err := a.p.st.State(ctx, w); errors.Is(err, store.ErrNotFound) {
			return changes, nil // none of this partition's records is in it
		} else if err != nil {
			return changes, err
		}
		var err error
		// Loaded with the others' parts as they are now, and marked to
		// recheck: every record is evaluated again below.
		if st, err = a.state(ctx, w); err != nil {
			return changes, err
		}
	}
	var flipped []uint64
	if !loaded {
		var err error
		if flipped, err = a.addPeerChanges(ctx, w, st); err != nil {
			return changes, err
		}
	}
	if a.recheck[w] {
		// Loaded from the store: its records were evaluated against a
		// view of the other partitions this analyser never saw.
		delete(a.recheck, w)
		touched[w], a.dirty[w] = true, true
		return a.reevaluateWindow(ctx, w, st, nil, nil, changes)
	}
	if len(flipped) == 0 {
		return changes, nil
	}
	slices.Sort(flipped)
	touched[w] = true
	return a.reevaluateWindow(ctx, w, st, flipped, nil, changes)
}

// addPeerChanges brings the other partitions' part of window w (in
// memory: st) up to date and returns the EdgeKeys of the edges whose class
// that changed and that a record of the window uses.
func (a *analyser) addPeerChanges(ctx context.Context, w int64, st *analysis.State) ([]uint64, error) {
	pe, err := a.p.peers.PeerState(ctx, w)
	if err != nil {
		return nil, err
	}
	old := a.peers[w]
	delta := analysis.NewState()
	delta.Merge(pe, 1)
	if old != nil {
		delta.Merge(old, -1) // prunes what did not change
	}
	var flipped []uint64
	if len(delta.Edges) > 0 || len(delta.Nodes) > 0 || len(delta.Propagated) > 0 || len(delta.APIs) > 0 || delta.Traces != 0 {
		before := make(map[graph.Edge]edgeBefore, len(delta.Edges))
		for e := range delta.Edges {
			before[e] = edgeBefore{class: st.Class(e, a.cfg), used: st.Edges[e] != nil}
		}
		if old != nil {
			st.Merge(old, -1)
		}
		st.Merge(pe, 1)
		a.peers[w] = pe
		a.touched[w] = a.p.cfg.Now()
		a.dirty[w] = true // its summary: the whole window changed
		for e, was := range before {
			if was.used && st.Class(e, a.cfg) != was.class {
				flipped = append(flipped, store.EdgeKey(e))
			}
		}
	}
	return flipped, nil
}
