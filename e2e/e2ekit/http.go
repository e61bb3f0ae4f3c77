package e2ekit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// PostOTLP posts an OTLP/HTTP protobuf request body to url; any answer
// but 200 is an error with the start of the response body.
func PostOTLP(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return nil
}

// Metric returns the sum of a metric's series on the /metrics of the
// server at addr (host:port): one unlabelled series, or one per label set
// (an instance analysing several partitions, or one named partition,
// labels them); it is an error when there is none.
func Metric(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(nil, 1<<20)
	sum, found := 0.0, false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return 0, fmt.Errorf("/metrics: %q", line)
			}
			rest = rest[end+1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	return sum, nil
}

// Dropped are the collector's log messages for data it gave up on (a
// permanent error from its backend, or retries exhausted).
var Dropped = []string{"Exporting failed. Dropping data.", "Exporting failed. Rejecting data."}

var exportErrorRE = regexp.MustCompile(`"otelcol.component.id": "([^"]*)".*"error": ("(?:[^"\\]|\\.)*")`)

// ExportError is the component and error of a collector's log line about
// a failed export, or the line itself.
func ExportError(line string) string {
	m := exportErrorRE.FindStringSubmatch(line)
	if m == nil {
		return line
	}
	msg, err := strconv.Unquote(m[2])
	if err != nil {
		msg = m[2]
	}
	return m[1] + ": " + msg
}
