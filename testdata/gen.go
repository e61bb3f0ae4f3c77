//go:build ignore

// Gen writes testdata/sample.jsonl.gz, the sample trace file the README's
// run command analyses: a HotROD-like mesh during an incident, half of its
// services speaking the error-ownership protocol.
//
//	go run testdata/gen.go
package main

import (
	"compress/gzip"
	"log"
	"os"
	"time"

	"github.com/stormradius/stormradius/sim"
)

func main() {
	own := sim.Policy{Retry: sim.RetryOwnership, Retries: 1, Claims: sim.ClaimsHonest, CriteriaAttr: true, ResendAttr: true, Placement: sim.ClaimHeader}
	naive := sim.Policy{Retry: sim.RetryNaive, Retries: 2}
	grpcOwn := own
	grpcOwn.Placement = sim.ClaimMetadata
	svcs := []sim.Service{
		{Name: "frontend", Version: "2.3.0", Operation: "GET /dispatch", Policy: own, Calls: []sim.Edge{
			{To: "customer"}, {To: "driver"}, {To: "route", Parallel: 3}, {To: "ads", FailOpen: true, DeclareFailOpen: true}}},
		{Name: "customer", Version: "1.4.1", Operation: "GET /customer", Policy: naive, Calls: []sim.Edge{{To: "mysql", Virtual: true, NameAttr: "db.system.name"}}},
		{Name: "driver", Version: "1.9.0", Operation: "driver.DriverService/FindNearest", Protocol: sim.GRPC, Policy: grpcOwn, Calls: []sim.Edge{
			{To: "redis", Virtual: true, Op: "GET", Sequential: 3}, {To: "eta"}}},
		{Name: "eta", Version: "0.9.2", Operation: "eta.Eta/Estimate", Protocol: sim.GRPC, Policy: grpcOwn, Calls: []sim.Edge{{To: "geo"}}},
		{Name: "geo", Version: "3.0.0", Operation: "GET /geo", Policy: naive},
		{Name: "route", Version: "1.0.0", Operation: "GET /route", Policy: naive, Calls: []sim.Edge{{To: "geo"}}},
		{Name: "ads", Version: "5.1.0", Operation: "GET /ads", Policy: naive, ErrorRate: 0.05},
	}
	sc := sim.Scenario{
		Services: svcs, Root: "frontend", Traces: 400, Seed: 20251118, Spacing: 150 * time.Millisecond,
		Faults: []sim.Fault{
			{Service: "geo", Rate: 0.6, Persistent: true, FromTrace: 150, ToTrace: 300}, // the incident
			{Service: "redis", Rate: 0.02},
			{Service: "mysql", Rate: 0.01},
		},
	}
	f, err := os.Create("testdata/sample.jsonl.gz")
	if err != nil {
		log.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	st, err := sim.Write(sc, zw, sim.JSONLines)
	if err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote testdata/sample.jsonl.gz: %d traces, %d spans", st.Traces, st.Spans)
}
