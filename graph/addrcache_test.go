package graph_test

import (
	"strconv"
	"testing"

	"github.com/stormradius/stormradius/graph"
)

// TestAddrCache: a cache before a map of 10,000 names (far more than its
// slots) never answers a key with another key's value (whichever slot of
// its pair the key was found in), answers the key put last, and hits on
// a second round; names equal in content but not in where their bytes
// are are other keys (a miss, never a wrong value). A cache that cannot
// grow (64 slots) holds the same guarantees while every key evicts
// another.
func TestAddrCache(t *testing.T) {
	var c graph.AddrCache[int]
	names := make([]string, 10_000)
	keys := make([]graph.Addr, len(names))
	for i := range names {
		names[i] = "svc-" + strconv.Itoa(i)
		keys[i] = graph.AddrOf(names[i], "op", "", "")
	}
	hits := 0
	for round := range 3 {
		for i := range keys {
			if v, ok := c.Get(&keys[i]); ok {
				hits++
				if v != i {
					t.Fatalf("round %d: key %d answered with %d's value", round, i, v)
				}
				continue
			}
			c.Put(&keys[i], i, i+1)
			if v, ok := c.Get(&keys[i]); !ok || v != i {
				t.Fatalf("key %d not found right after Put", i)
			}
			if i > 0 {
				if v, ok := c.Get(&keys[i-1]); ok && v != i-1 {
					t.Fatalf("key %d answered with %d's value", i-1, v)
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("no hit in three rounds: the test does not test hits")
	}
	copyName := string([]byte(names[7]))
	other := graph.AddrOf(copyName, "op", "", "")
	if v, ok := c.Get(&other); ok {
		t.Fatalf("a copy of a name found %d: only where the bytes are counts", v)
	}
	var small graph.AddrCache[int]
	small.Put(&keys[0], 0, 1)
	for i := 1; i < len(keys); i++ {
		small.Put(&keys[i], i, 1)
		if v, ok := small.Get(&keys[i-1]); ok && v != i-1 {
			t.Fatalf("small cache: key %d answered with %d", i-1, v)
		}
		if v, ok := small.Get(&keys[0]); ok && v != 0 {
			t.Fatalf("small cache: key 0 answered with %d", v)
		}
	}
}
