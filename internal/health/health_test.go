package health_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stormradius/stormradius/internal/health"
)

func get(t *testing.T, s *health.Status) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestReadyz(t *testing.T) {
	var s health.Status
	if code, body := get(t, &s); code != http.StatusServiceUnavailable || body != "starting or stopping\n" {
		t.Fatalf("zero value: %d %q", code, body)
	}
	s.SetReady(true)
	if code, body := get(t, &s); code != 200 || body != "ready\n" {
		t.Fatalf("ready: %d %q", code, body)
	}
	s.Warn("routing", "3 traces split; set partition_traces_by_id: true")
	if code, body := get(t, &s); code != 200 || body != "ready\nwarning: routing: 3 traces split; set partition_traces_by_id: true\n" {
		t.Fatalf("warning: %d %q", code, body)
	}
	s.Fail("kafka", "broker b:9093 refused --kafka-sasl-username")
	code, body := get(t, &s)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: kafka: broker b:9093") || !strings.Contains(body, "\nwarning: routing") {
		t.Fatalf("failing: %d %q", code, body)
	}
	s.Clear("kafka")
	if code, _ := get(t, &s); code != 200 {
		t.Fatalf("cleared: %d", code)
	}
	s.SetReady(false)
	if code, body := get(t, &s); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "starting or stopping\nwarning: routing") {
		t.Fatalf("stopping: %d %q", code, body)
	}
}
