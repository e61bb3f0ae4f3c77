package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/stormradius/stormradius/analysis"
	"github.com/stormradius/stormradius/query"
	"github.com/stormradius/stormradius/store"
)

// keyFunc returns the normalised parameters of a request — what its answer
// depends on besides the store's content — and the members the answer
// echoes from the request itself (nil for none); ok false when the
// request is answered without the cache (a bad parameter: the direct path
// says what is wrong).
type keyFunc func(r *http.Request) (key string, echo []member, ok bool)

// nowKey holds the instant a request resolves "now" to, so that its key
// and its answer resolve relative ranges alike.
type nowKey struct{}

// now returns the request's "now": the one its key was made with, or the
// clock.
func (s *server) now(r *http.Request) time.Time {
	if t, ok := r.Context().Value(nowKey{}).(time.Time); ok {
		return t
	}
	return s.cfg.Now()
}

// cached serves an endpoint from the answer cache: the answer of the
// request's key at the store's current write position, computed by direct
// when not held. The auth middleware has run before: an unauthenticated
// request never reaches it. Without a cache, direct answers as it is.
func (s *server) cached(name string, key keyFunc, direct func(r *http.Request) (any, error)) http.Handler {
	return s.cachedBy(name, key, direct, true)
}

// cachedBy is cached; without atPosition the key says all the answer
// depends on (the trace view's stamp).
func (s *server) cachedBy(name string, key keyFunc, direct func(r *http.Request) (any, error), atPosition bool) http.Handler {
	plain := s.h(direct)
	if s.cache == nil {
		return plain
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), nowKey{}, s.cfg.Now()))
		k, echo, ok := key(r)
		if !ok {
			plain.ServeHTTP(w, r)
			return
		}
		full := name + "\x00" + k
		if atPosition {
			// The position first: an answer computed after it covers at
			// least the writes before it.
			pos, err := s.svc.Store.Position(r.Context())
			if err != nil {
				s.fail(w, r, err)
				return
			}
			full += "\x00" + strconv.FormatUint(pos, 10)
		}
		a, err := s.cache.get(r.Context(), full, s.cfg.Timeout, func(ctx context.Context) (*answer, error) {
			v, err := direct(r.WithContext(ctx))
			var se *statusError
			switch {
			case errors.As(err, &se):
				return newAnswer(se.status, se.body)
			case err != nil:
				return nil, err
			case echo != nil:
				m := v.(map[string]any)
				for _, e := range echo {
					delete(m, e.name)
				}
				return newMembers(m)
			}
			return newAnswer(http.StatusOK, v)
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		serveAnswer(w, r, a, echo)
	})
}

// document returns the figures of q's range: with a cache, computed once
// for the requests that ask for the same minutes at the same write
// position at once (the UI asks /fleet, /apis and /services together).
func (s *server) document(ctx context.Context, q store.Query) (*analysis.Document, error) {
	if s.cache == nil {
		return s.svc.Figures(ctx, q)
	}
	pos, err := s.svc.Store.Position(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := q.MinuteRange()
	v, err := s.cache.shared(ctx, fmt.Sprintf("document %d %d %d", lo, hi, pos), s.cfg.Timeout, func(ctx context.Context) (any, error) {
		return s.svc.Figures(ctx, q)
	})
	if err != nil {
		return nil, err
	}
	return v.(*analysis.Document), nil
}

// minutes is the key of a range: the minutes it selects, which are all
// its answers depend on (store.Query).
func minutes(q store.Query) string {
	lo, hi := q.MinuteRange()
	return strconv.FormatInt(lo, 10) + ":" + strconv.FormatInt(hi, 10)
}

// figuresKey: the figures of a range, echoing its from and to.
func (s *server) figuresKey(r *http.Request) (string, []member, bool) {
	q, err := s.rangeOf(r)
	if err != nil {
		return "", nil, false
	}
	return minutes(q), []member{echoTime("from", time.Unix(0, q.From).UTC()), echoTime("to", time.Unix(0, q.To).UTC())}, true
}

// radiusKey: a series depends on its minutes, its step, and (to refuse
// too many points alike) its length.
func (s *server) radiusKey(r *http.Request) (string, []member, bool) {
	api, q, step, err := s.radiusArgs(r)
	if err != nil {
		return "", nil, false
	}
	return fmt.Sprintf("%q %s %d %d", api, minutes(q), query.Span(q), step), nil, true
}

func (s *server) graphKey(r *http.Request) (string, []member, bool) {
	api, q, err := s.apiRange(r)
	if err != nil {
		return "", nil, false
	}
	return fmt.Sprintf("%q %s", api, minutes(q)), nil, true
}

func (s *server) incidentsKey(r *http.Request) (string, []member, bool) {
	q, limit, err := s.incidentsArgs(r)
	if err != nil {
		return "", nil, false
	}
	return fmt.Sprintf("%q %d %s", q.API, limit, minutes(q)), nil, true
}

func (s *server) incidentKey(r *http.Request) (string, []member, bool) {
	return strconv.Quote(chi.URLParam(r, "id")), nil, true
}

// traceKey: a trace's view depends on its spans and its record, which
// the store's stamp of the trace follows (store.TraceStamper: ClickHouse;
// the key is read before the answer, as the position is for the others).
// On a store without stamps it is read each time.
func (s *server) traceKey(r *http.Request) (string, []member, bool) {
	st, ok := s.svc.Store.(store.TraceStamper)
	if !ok {
		return "", nil, false
	}
	id, err := traceParam(r)
	if err != nil {
		return "", nil, false
	}
	stamp, ok, err := st.TraceStamp(r.Context(), id)
	if err != nil || !ok {
		return "", nil, false
	}
	return id.String() + " " + strconv.FormatUint(stamp, 10), nil, true
}

// whatifKey: a what-if depends on its question (the body, as sent) and,
// for an API, the windows of its range's minutes. The body is read here
// and given back to the request for the answer (or, too large, for the
// direct path's 413).
func (s *server) whatifKey(r *http.Request) (string, []member, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodyBytes+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
	if err != nil || int64(len(b)) > s.cfg.MaxBodyBytes {
		return "", nil, false
	}
	q, err := s.rangeOf(r)
	if err != nil {
		return "", nil, false
	}
	return minutes(q) + " " + tagOf(b), nil, true
}

// planKey: a plan depends on its request, as parsed, and the windows of
// its range's minutes.
func (s *server) planKey(r *http.Request) (string, []member, bool) {
	req, q, err := s.planArgs(r)
	if err != nil {
		return "", nil, false
	}
	b, err := json.Marshal(req)
	return minutes(q) + " " + string(b), nil, err == nil
}

// gateKey: the decision's request as parsed, its windows to the
// nanosecond (a decision names them), and how it is answered. A GET has no
// canary to age: its answer depends on nothing else.
func (s *server) gateKey(r *http.Request) (string, []member, bool) {
	req, ans, err := s.gateRequest(r, r.URL.Query())
	if err != nil {
		return "", nil, false
	}
	b, err := json.Marshal(struct {
		R query.GateRequest
		A query.GateAnswer
	}{req, ans})
	return string(b), nil, err == nil
}
