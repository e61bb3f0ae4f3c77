// Package chdsn reads the ClickHouse DSNs stormradius takes — the store's
// and a source table's — as clickhouse-go's, with the parameters of ours
// for TLS with a private CA or a client certificate and for a password
// kept in a file (docs/operations.md, "ClickHouse"), and whatever
// parameters the caller names as its own.
package chdsn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/stormradius/stormradius/internal/certs"
	"github.com/stormradius/stormradius/internal/secret"
)

// Names are the TLS and password parameters.
var Names = []string{"tls_ca", "tls_cert", "tls_key", "tls_server_name", "password_file"}

// Params are the TLS and password parameters a DSN set, by name.
type Params map[string]string

// TLSOn reports whether a TLS parameter is set (any turns TLS on).
func (p Params) TLSOn() bool {
	return p["tls_ca"] != "" || p["tls_cert"] != "" || p["tls_key"] != "" || p["tls_server_name"] != ""
}

// Apply sets o's TLS and its password from password_file.
func (p Params) Apply(o *ch.Options) error {
	if f := p["password_file"]; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("password_file: %w", err)
		}
		o.Auth.Password = strings.TrimRight(string(b), "\r\n")
	}
	if !p.TLSOn() {
		return nil
	}
	if o.TLS == nil {
		o.TLS = &tls.Config{}
	}
	if err := certs.Client(o.TLS, p["tls_ca"], p["tls_cert"], p["tls_key"], p["tls_server_name"]); err != nil {
		return fmt.Errorf("tls_ca, tls_cert, tls_key: %w", err)
	}
	return nil
}

// DSN is a parsed DSN.
type DSN struct {
	// Options are clickhouse-go's, with TLS and the password applied.
	Options *ch.Options
	// Own are the caller's own parameters, as the DSN had them.
	Own url.Values
	// TLS are the TLS and password parameters.
	TLS Params
	// UserPassword: the DSN's userinfo holds a password.
	UserPassword bool
}

// Parse reads dsn, its parameters named in own kept apart from
// clickhouse-go's. Its errors never hold the DSN's password.
func Parse(dsn string, own ...string) (*DSN, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New(secret.Scrub(err.Error(), dsn))
	}
	q := u.Query()
	out := &DSN{Own: url.Values{}, TLS: Params{}}
	for _, k := range own {
		if q.Has(k) {
			out.Own[k] = q[k]
		}
		q.Del(k)
	}
	_, out.UserPassword = u.User.Password()
	for _, k := range Names {
		if v := q.Get(k); v != "" {
			out.TLS[k] = v
		}
		q.Del(k)
	}
	if (u.Scheme == "https" || out.TLS.TLSOn()) && !q.Has("secure") {
		q.Set("secure", "true") // clickhouse-go wants both
	}
	u.RawQuery = q.Encode()
	if out.Options, err = ch.ParseDSN(u.String()); err != nil {
		return nil, errors.New(secret.Scrub(err.Error(), dsn))
	}
	if err := out.TLS.Apply(out.Options); err != nil {
		return nil, err
	}
	return out, nil
}
