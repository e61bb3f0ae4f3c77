package offline

// SetMaxMinuteResults sets how many minutes' sums an Analyze worker keeps for
// incidents (the rest of its results go to its file) and returns the
// previous bound.
func SetMaxMinuteResults(n int) int {
	old := maxMinuteResults
	maxMinuteResults = n
	return old
}

// SetMinRunSpans sets minRunSpans and returns what it was.
func SetMinRunSpans(n int) int {
	old := minRunSpans
	minRunSpans = n
	return old
}
