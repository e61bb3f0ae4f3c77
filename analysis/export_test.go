package analysis

// Len returns how many names of each kind the window admitted.
func (a *Admitted) Len() (apis, services, operations, versions int) {
	return len(a.apis), len(a.services), len(a.nodes), len(a.versions)
}

// SetMaxServiceSlots sets maxServiceSlots and returns what it was.
func SetMaxServiceSlots(n int) int {
	old := maxServiceSlots
	maxServiceSlots = n
	return old
}
