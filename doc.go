// Package stormradius is the root of the stormradius module: it holds no
// code, only this map and the test that keeps the layers apart
// (layers_test.go). docs/ARCHITECTURE.md describes every package; the
// contract is docs/SPEC.md.
//
// A span goes from a receiver to a REST answer along the folders:
//
//	ingest (decode OTLP) → ingest/otlp, ingest/kafka (receivers)
//	  → pipeline (admission, durable write, pending traces, analysis, rollups)
//	  → graph, attribution, radius, analysis (pure analysis)
//	  → store (contract) → store/sqlite, store/clickhouse
//	  → query (documents, incidents, series, what-if, the gate) → web (REST, UI)
//
// offline is the same analysis for a finite file (`stormradius analyze`);
// internal/app and internal/demo wire a service; cmd/ only parses flags
// and calls them.
package stormradius
