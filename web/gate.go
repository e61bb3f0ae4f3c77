package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stormradius/stormradius/gate"
	"github.com/stormradius/stormradius/query"
)

// webhook is the part of a Flagger webhook payload the gate reads
// (Flagger's CanaryWebhookPayload: name, namespace, phase, checksum,
// metadata). Other top-level fields are let through: Flagger may add some.
type webhook struct {
	Name      string                     `json:"name"`
	Namespace string                     `json:"namespace"`
	Phase     string                     `json:"phase"`
	Checksum  string                     `json:"checksum"`
	Metadata  map[string]json.RawMessage `json:"metadata"`
}

// gate answers GET /api/v1/gate, and POST as a Flagger webhook: Flagger
// posts {"name", "namespace", "phase", "checksum", "metadata": {...}},
// and the metadata's values are the same parameters as the query's (the
// query's win): strings, as Flagger sends them, or numbers and booleans,
// which an Argo Rollouts web metric's jsonBody written by hand may hold.
// A parameter or metadata key the gate does not know is a 400.
//
// Pass is 200, fail 412; undecided as the undecided parameter says
// (query.GateAnswer): by default 200 while the Flagger canary is young —
// the first request of its namespace, name and checksum less than
// query.DefaultUndecidedGrace ago — and 412 after, or at once without a
// canary. always_200=true answers 200 whatever the decision, for clients
// that read the decision from the body and take any other status for an
// error (an Argo Rollouts web metric).
func (s *server) gate(r *http.Request) (any, error) {
	v := r.URL.Query()
	var hook webhook
	if r.Method == http.MethodPost {
		if err := s.decodeBody(r, &hook, false, "a Flagger webhook payload with the gate's parameters in metadata"); err != nil {
			return nil, err
		}
		if err := query.CheckGateParams(slices.Collect(maps.Keys(hook.Metadata)), "metadata."); err != nil {
			return nil, err
		}
		for k, raw := range hook.Metadata {
			val, err := metadataValue(raw)
			if err != nil {
				return nil, badParam("metadata."+k, "%v", err)
			}
			if !v.Has(k) {
				v.Set(k, val)
			}
		}
	}
	req, ans, err := s.gateRequest(r, v)
	if err != nil {
		return nil, err
	}
	// A canary's age starts with its first request, whatever it is
	// answered.
	var c *canary
	if hook.Name != "" {
		c = s.canaries.see(hook, s.cfg.Now())
		if c.first && c.remembered {
			s.cfg.Logger.Info("gate: first request of a canary", "namespace", hook.Namespace, "name", hook.Name, "checksum", hook.Checksum)
		}
	}
	d, err := s.svc.Gate(r.Context(), req)
	if err != nil {
		return nil, err
	}
	if status := gateStatus(d, ans, c); status != http.StatusOK {
		return nil, &statusError{status, d}
	}
	return d, nil
}

// gateRequest parses the gate's parameters: the question and how to
// answer it.
func (s *server) gateRequest(r *http.Request, v url.Values) (query.GateRequest, query.GateAnswer, error) {
	req, err := query.ParseGate(v, s.now(r))
	if err != nil {
		return req, query.GateAnswer{}, err
	}
	ans, err := query.ParseGateAnswer(v)
	return req, ans, err
}

// gateStatus is the status a decision is answered with; an undecided one
// answered by a canary's age says so in its reasons.
func gateStatus(d *gate.Decision, ans query.GateAnswer, c *canary) int {
	switch {
	case ans.Always200 || d.Decision == gate.Pass:
		return http.StatusOK
	case d.Decision == gate.Fail:
		return http.StatusPreconditionFailed
	case ans.Undecided.Pass:
		return http.StatusOK
	case c == nil || ans.Undecided.Grace == 0:
		return http.StatusPreconditionFailed
	case !c.remembered:
		d.Reasons = append(d.Reasons, fmt.Sprintf("undecided, answered 412: this gate remembers %d canaries at most and cannot tell the age of canary %s/%s",
			maxCanaries, c.namespace, c.name))
		return http.StatusPreconditionFailed
	case c.age < ans.Undecided.Grace:
		d.Reasons = append(d.Reasons, fmt.Sprintf("undecided, answered 200 while canary %s/%s is young: this gate first saw it %s ago, undecided=%s",
			c.namespace, c.name, c.age.Round(time.Second), ans.Undecided.Grace))
		return http.StatusOK
	default:
		d.Reasons = append(d.Reasons, fmt.Sprintf("undecided, answered 412: this gate first saw canary %s/%s %s ago (%s), longer than undecided=%s",
			c.namespace, c.name, c.age.Round(time.Second), c.since.UTC().Format(time.RFC3339), ans.Undecided.Grace))
		return http.StatusPreconditionFailed
	}
}

// Bounds of the canaries remembered.
const (
	// maxCanaries is how many canaries the gate remembers at once; a new
	// one past it is not remembered, and has no grace.
	maxCanaries = 10000
	// canaryForget: a canary not seen for this long is forgotten
	// (query.MaxUndecidedGrace: it is past any grace).
	canaryForget = query.MaxUndecidedGrace
)

// canaries remembers when the gate first saw each Flagger canary: its
// namespace, name and checksum (Flagger's hash of the canary's tracked
// configs and last applied spec, new with each revision). Flagger's rollout
// hooks all say phase "Progressing", so the phase cannot tell a young
// canary from an old one; the first request can. In memory: each
// instance of the gate keeps its own, and a restart forgets.
type canaries struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]*canarySeen
}

type canarySeen struct{ first, last time.Time }

// canary is what a request learns of its canary.
type canary struct {
	namespace, name string
	since           time.Time     // first seen
	age             time.Duration // since then
	first           bool          // this request is the first
	remembered      bool          // false: the table is full
}

// see records a request of the canary at now and returns its age.
func (cs *canaries) see(h webhook, now time.Time) *canary {
	c := &canary{namespace: h.Namespace, name: h.Name}
	// The key is a hash: names as long as a body holds take no more room.
	k := sha256.Sum256([]byte(strconv.Quote(h.Namespace) + strconv.Quote(h.Name) + strconv.Quote(h.Checksum)))
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.seen == nil {
		cs.seen = map[[sha256.Size]byte]*canarySeen{}
	}
	e := cs.seen[k]
	if e == nil {
		if len(cs.seen) >= maxCanaries {
			for key, old := range cs.seen {
				if now.Sub(old.last) > canaryForget {
					delete(cs.seen, key)
				}
			}
		}
		if len(cs.seen) >= maxCanaries {
			return c
		}
		e = &canarySeen{first: now}
		cs.seen[k] = e
		c.first = true
	}
	e.last = now
	c.remembered, c.since, c.age = true, e.first, max(0, now.Sub(e.first))
	return c
}

// metadataValue is a webhook metadata value as a query parameter: a string
// as it is, a number or a boolean as written.
func metadataValue(raw json.RawMessage) (string, error) {
	var x any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	switch x := x.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("%s: want a string, a number or a boolean", raw)
}
