module github.com/stormradius/stormradius

go 1.26.8

require (
	go.opentelemetry.io/collector/pdata v1.71.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
)
