package app

import (
	"flag"
	"testing"
)

func TestApplyEnv(t *testing.T) {
	t.Setenv("STORMRADIUS_CLAIM_HEADER", "x-uber-error-claim")
	t.Setenv("STORMRADIUS_FORMAT", "table")
	t.Setenv("STORMRADIUS_WORKERS", "many")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	header := fs.String("claim-header", "x-error-claim", "")
	format := fs.String("format", "json", "")
	if err := fs.Parse([]string{"--format", "json"}); err != nil {
		t.Fatal(err)
	}
	if err := ApplyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if *header != "x-uber-error-claim" {
		t.Errorf("env fallback not applied: %q", *header)
	}
	if *format != "json" {
		t.Errorf("command line must win over env: %q", *format)
	}
	if !Given(fs, "claim-header") || Given(fs, "other") {
		t.Error("Given")
	}
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.Int("workers", 0, "")
	fs2.Parse(nil)
	if err := ApplyEnv(fs2); err == nil {
		t.Error("a bad env value must be an error naming the variable")
	}
}
