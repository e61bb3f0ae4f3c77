package kafka

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/stormradius/stormradius/internal/certs"
	"github.com/stormradius/stormradius/internal/secret"
)

// Security is how the client reaches a locked broker: TLS (system roots,
// or a CA file; a client certificate) and SASL (PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512), with the names the collector's kafka exporter and
// kafka-go use. The zero value is a plaintext connection.
type Security struct {
	// TLS turns TLS on with the system's roots. Any other TLS field turns
	// it on too.
	TLS bool
	// TLSCA is a PEM file of the CAs that sign the brokers' certificates
	// (instead of the system roots).
	TLSCA string
	// TLSCert and TLSKey are PEM files of a client certificate and its
	// key (both or neither).
	TLSCert, TLSKey string
	// TLSServerName is the name the brokers' certificates must hold (the
	// broker's host when empty).
	TLSServerName string
	// TLSInsecureSkipVerify accepts any broker certificate (tests only:
	// the receiver warns at start and in its metrics).
	TLSInsecureSkipVerify bool
	// SASLMechanism is plain, scram-sha-256 or scram-sha-512 (empty: no
	// SASL); SASLUsername and SASLPassword its credentials.
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
}

// TLSOn reports whether s connects over TLS.
func (s Security) TLSOn() bool {
	return s.TLS || s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "" || s.TLSServerName != "" || s.TLSInsecureSkipVerify
}

// Enabled reports whether s is anything but plaintext without SASL.
func (s Security) Enabled() bool { return s.TLSOn() || s.SASLMechanism != "" }

// Dialer returns the kafka-go dialer of s, or an error naming the
// setting that is wrong (the password never appears in it).
func (s Security) Dialer() (*kafkago.Dialer, error) {
	d := &kafkago.Dialer{Timeout: 10 * time.Second, DualStack: true}
	if s.TLSOn() {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		d.TLS = cfg
	}
	if s.SASLMechanism != "" {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		d.SASLMechanism = m
	}
	return d, nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: s.TLSInsecureSkipVerify}
	if err := certs.Client(cfg, s.TLSCA, s.TLSCert, s.TLSKey, s.TLSServerName); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cfg, nil
}

func (s Security) mechanism() (sasl.Mechanism, error) {
	if s.SASLUsername == "" || s.SASLPassword == "" {
		return nil, fmt.Errorf("kafka: SASL %s needs a username and a password", s.SASLMechanism)
	}
	switch strings.ToLower(s.SASLMechanism) {
	case "plain":
		return plain.Mechanism{Username: s.SASLUsername, Password: s.SASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, s.SASLUsername, s.SASLPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, s.SASLUsername, s.SASLPassword)
	}
	return nil, fmt.Errorf("kafka: SASL mechanism %q: want plain, scram-sha-256 or scram-sha-512", s.SASLMechanism)
}

// String describes s with its password masked: a Security that reaches a
// log or an error by mistake shows no secret.
func (s Security) String() string {
	if s.SASLPassword != "" {
		s.SASLPassword = secret.Mask
	}
	type plain Security // without this method
	return fmt.Sprintf("%+v", plain(s))
}

// LogValue is String for log/slog.
func (s Security) LogValue() slog.Value { return slog.StringValue(s.String()) }
