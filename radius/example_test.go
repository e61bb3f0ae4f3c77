package radius_test

import (
	"fmt"

	"github.com/stormradius/stormradius/radius"
)

// The seed's chain A→…→G with D failing and one retry per hop: naive
// retries multiply by 2 at every level above D; error ownership lets only
// C retry D, within a 10% budget.
func ExampleModel_Requests() {
	chain := radius.ChainModel([]string{"A", "B", "C", "D", "E", "F", "G"})
	failing := []bool{false, false, false, true, false, false, false}
	for _, p := range []radius.Policy{radius.Naive, radius.Budget, radius.Ownership} {
		req, _ := chain.Requests(radius.Scenario{Failing: failing, Retries: 1, Budget: 0.1, Policy: p})
		fmt.Println(p, req)
	}
	// Output:
	// naive [1 2 4 8 8 8 8]
	// budget [1 1.1 1.21 1.331 1.331 1.331 1.331]
	// ownership [1 1 1 1.1 1.1 1.1 1.1]
}

// A callee failing 20% of the time, independently, seen through one retry
// within a 10% budget.
func ExampleErrorRateAfterRetries() {
	fmt.Printf("%.2f\n", radius.ErrorRateAfterRetries(0.20, 0.10))
	// Output: 0.12
}
