package analysis

// Slot ids from the evaluator to the reports.
//
// An Evaluator numbers the services, nodes and service versions it has
// seen (pairIndex): a slot is a small integer that stands for one name
// until the index is emptied, which starts a new numbering (a new
// slotEpoch). A transient result (Evaluator.TransientResults) carries the
// slots of its services, nodes and versions (resultIDs), and a report
// finds the aggregates of the slots it has seen before by indexing a
// slice (slotTable), not by hashing names: names are found once per
// report and numbering, not once per trace.

// slotEpoch identifies one numbering of an index's slots. It is never
// empty: distinct epochs have distinct addresses.
type slotEpoch struct{ _ int64 }

// resultIDs are the evaluator's slots of a result's entries: Services[i]
// is slot services[i] of epoch svc, and so on; claims are the slots of
// VersionClaims' versions (epoch ver). Valid until the evaluator's next
// Evaluate.
type resultIDs struct {
	services, nodes, versions, claims []int32
	svc, node, ver                    *slotEpoch
}

// slotTable caches a report's aggregates by the slots of one numbering.
type slotTable[V comparable] struct {
	epoch  *slotEpoch
	bySlot []V
}

// get returns the aggregate of slot i of epoch ep, if cached; then
// put may cache it (the table is sized for i).
func (t *slotTable[V]) get(ep *slotEpoch, i int32) (V, bool) {
	var zero V
	if t.epoch != ep {
		t.epoch = ep
		clear(t.bySlot)
	}
	if int(i) >= len(t.bySlot) {
		t.bySlot = append(t.bySlot, make([]V, int(i)+1-len(t.bySlot))...)
		return zero, false
	}
	v := t.bySlot[i]
	return v, v != zero
}

// put caches v for slot i, after a get of i.
func (t *slotTable[V]) put(i int32, v V) { t.bySlot[i] = v }
