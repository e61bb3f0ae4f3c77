package pipeline

// SetMaxMinuteResults sets how many minutes' sums a Batch worker keeps for
// incidents (the rest of its results go to its file) and returns the
// previous bound.
func SetMaxMinuteResults(n int) int {
	old := maxMinuteResults
	maxMinuteResults = n
	return old
}

// FromFlight returns how many records p read from the batch in flight in
// place of the store's (once p has stopped).
func FromFlight(p *Pipeline) int { return p.an.fromFlight }
