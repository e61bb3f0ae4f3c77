package chdsn_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/internal/chdsn"
)

// Parse keeps the caller's own parameters apart from clickhouse-go's,
// turns TLS on for any TLS parameter, reads the password from its file
// (without the line end), and never puts a password in an error.
func TestParse(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("S3cret!\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	d, err := chdsn.Parse("clickhouse://u@h:9000/db?table=otel_traces&ttl=48h&password_file="+pw+"&dial_timeout=3s", "table", "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if d.Own.Get("table") != "otel_traces" || d.Own.Get("ttl") != "48h" || d.Options.Auth.Password != "S3cret!" ||
		d.Options.Auth.Username != "u" || d.Options.Auth.Database != "db" || d.Options.TLS != nil || d.UserPassword {
		t.Errorf("parsed %+v, own %v, auth %+v, tls %v", d, d.Own, d.Options.Auth, d.Options.TLS)
	}
	d, err = chdsn.Parse("clickhouse://u:p@h:9440/db?tls_server_name=ch.example", "table")
	if err != nil {
		t.Fatal(err)
	}
	if d.Options.TLS == nil || d.Options.TLS.ServerName != "ch.example" || !d.UserPassword || d.Own.Has("table") {
		t.Errorf("TLS %+v, user password %v, own %v", d.Options.TLS, d.UserPassword, d.Own)
	}
	for _, bad := range []string{"clickhouse://u:Secret123@h:9000/db?dial_timeout=banana", "clickhouse://u:Secret123@h:9000/db?tls_ca=/nonexistent.pem",
		"clickhouse://u:Secret123@h:9000/db?password_file=/nonexistent"} {
		if _, err := chdsn.Parse(bad); err == nil || strings.Contains(err.Error(), "Secret123") {
			t.Errorf("%s: %v, want an error without the password", bad, err)
		}
	}
}
