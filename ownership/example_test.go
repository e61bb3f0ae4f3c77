package ownership_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/stormradius/stormradius/ownership"
)

// A service whose own code fails claims its error; one whose dependency
// failed, and was retried by the Transport, answers unclaimed so that its
// callers do not retry it again.
func ExampleHandler() {
	// inventory fails on its own.
	inventory := httptest.NewServer(ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "disk full", http.StatusInternalServerError)
	})))
	defer inventory.Close()

	// checkout calls inventory through a Transport with the request's
	// context, and fails when it fails.
	client := &http.Client{Transport: ownership.Transport(nil, ownership.WithBackoff(time.Millisecond, 10*time.Millisecond))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", inventory.URL, nil)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode >= 500 {
			http.Error(w, "inventory unavailable", http.StatusBadGateway)
			return
		}
		resp.Body.Close()
	})
	checkout := httptest.NewServer(ownership.Handler(mux))
	defer checkout.Close()

	for _, url := range []string{inventory.URL, checkout.URL + "/checkout"} {
		resp, err := http.Get(url)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get(ownership.DefaultHeader))
	}
	// Output:
	// 500 claimed
	// 502 unclaimed
}

// The Transport retries a claimed failure (or one without a claim), and
// never an unclaimed one.
func ExampleTransport() {
	var hits atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) < 3 {
			w.Header().Set("X-Error-Claim", "claimed")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer flaky.Close()
	propagated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Error-Claim", "unclaimed")
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer propagated.Close()

	client := &http.Client{Transport: ownership.Transport(http.DefaultTransport,
		ownership.WithMaxRetries(2), ownership.WithBackoff(time.Millisecond, 50*time.Millisecond))}
	for _, url := range []string{flaky.URL, propagated.URL} {
		hits.Store(0)
		resp, err := client.Get(url)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d after %d attempts\n", resp.StatusCode, hits.Load())
	}
	// Output:
	// 200 after 3 attempts
	// 500 after 1 attempts
}

// Calls that do not go over HTTP are recorded with Observe; a dependency
// whose failure the handler absorbs is declared with FailOpen.
func ExampleObserve() {
	var db *sql.DB // nil here: the query fails
	query := func(ctx context.Context) error {
		if db == nil {
			return errors.New("no database")
		}
		return db.PingContext(ctx)
	}
	h := ownership.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		// A cache miss is not fatal: a fail-open dependency.
		cacheErr := errors.New("cache down")
		ownership.Observe(ownership.FailOpen(ctx), ownership.Outcome{Failed: cacheErr != nil})
		// The database is fail-close, and nobody retried the query.
		err := query(ctx)
		ownership.Observe(ctx, ownership.Outcome{Failed: err != nil})
		if err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/orders", nil))
	// Claimed: the database error was not retried below, so the caller
	// should retry it once (at least once).
	fmt.Println(rec.Code, rec.Header().Get("X-Error-Claim"))
	// Output: 503 claimed
}

func ExampleDecide() {
	fmt.Println(ownership.Decide(nil))
	fmt.Println(ownership.Decide([]ownership.Outcome{{Failed: true, CriteriaSatisfied: true}}))
	fmt.Println(ownership.Decide([]ownership.Outcome{{Failed: true}}))
	fmt.Println(ownership.Decide([]ownership.Outcome{{Failed: true, FailOpen: true}}))
	// Output:
	// claimed
	// unclaimed
	// claimed
	// claimed
}
