package kafka_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stormradius/stormradius/ingest/kafka"
	"github.com/stormradius/stormradius/pipeline"
)

// A collector configured with
//
//	exporters:
//	  kafka:
//	    brokers: [kafka:9092]
//	    traces: {topic: otlp_spans, encoding: otlp_proto}
//	    partition_traces_by_id: true
//
// is read by a Receiver with the defaults; every ingester that uses the same
// group id shares the topic's partitions.
func ExampleReceiver() {
	var pipeline pipeline.Consumer // the service's pipeline: Consume returns once spans are durable

	r, err := kafka.NewReceiver(kafka.Config{
		Brokers:    []string{"kafka:9092"},
		Registerer: prometheus.DefaultRegisterer,
	}, pipeline)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := r.Run(ctx); err != nil { // nil once ctx ends
		log.Fatal(err)
	}
}
