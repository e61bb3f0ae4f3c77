package pipeline

// FromFlight returns how many records p read from the batch in flight in
// place of the store's (once p has stopped).
func FromFlight(p *Pipeline) int { return p.an.fromFlight }
