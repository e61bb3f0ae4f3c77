package ownership_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/stormradius/stormradius/ownership"
)

// health is a gRPC service whose Check fails by the service name asked:
// "own" fails on its own, "propagate" after an HTTP dependency that fails
// (retried by a Transport), "app" with a claim the handler leaves alone.
type health struct {
	healthpb.UnimplementedHealthServer
	hits   atomic.Int32
	client *http.Client
	dep    string
}

func (h *health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.hits.Add(1)
	switch req.Service {
	case "own":
		return nil, status.Error(codes.Internal, "broken")
	case "propagate":
		if !via(h.client, "GET", h.dep)(ctx) {
			return nil, status.Error(codes.Unavailable, "dependency failed")
		}
	case "notfound":
		return nil, status.Error(codes.NotFound, "no such service")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestGRPC(t *testing.T) {
	srvSvc, cliSvc := newSvc(t, "S"), newSvc(t, "C")
	dep := newFailing(t, 500, "claimed")
	h := &health{client: srvSvc.client(fast, ownership.WithMaxRetries(1)), dep: dep.srv.URL}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(grpc.UnaryInterceptor(ownership.UnaryServerInterceptor(srvSvc.opts()...)))
	healthpb.RegisterHealthServer(gs, h)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ownership.UnaryClientInterceptor(cliSvc.opts(fast, ownership.WithMaxRetries(2), ownership.WithBudget(0, 0))...)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	for _, c := range []struct {
		service  string
		code     codes.Code
		attempts int32
		claim    string // the server's claim
	}{
		// Own error: claimed, so the client retries it (2 retries).
		{"own", codes.Internal, 3, "claimed"},
		// Propagated after the Transport retried: unclaimed, not retried.
		{"propagate", codes.Unavailable, 1, "unclaimed"},
		// Not a failure: no claim, no retry.
		{"notfound", codes.NotFound, 1, ""},
		{"", codes.OK, 1, ""},
	} {
		srvSvc.rec.Reset()
		cliSvc.rec.Reset()
		h.hits.Store(0)
		var trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: c.service}, grpc.Trailer(&trailer))
		if status.Code(err) != c.code {
			t.Errorf("%s: code %v, want %v", c.service, status.Code(err), c.code)
		}
		if h.hits.Load() != c.attempts {
			t.Errorf("%s: %d attempts, want %d", c.service, h.hits.Load(), c.attempts)
		}
		if got := trailer.Get(ownership.DefaultHeader); c.claim == "" && len(got) > 0 || c.claim != "" && (len(got) != 1 || got[0] != c.claim) {
			t.Errorf("%s: trailer claim %q, want %q", c.service, got, c.claim)
		}
		servers := srvSvc.spans(trace.SpanKindServer)
		clients := cliSvc.spans(trace.SpanKindClient)
		if len(servers) != int(c.attempts) || len(clients) != int(c.attempts) {
			t.Fatalf("%s: %d SERVER, %d CLIENT spans", c.service, len(servers), len(clients))
		}
		for i, s := range servers {
			if s.Name() != "grpc.health.v1.Health/Check" || s.Parent().SpanID() != clients[i].SpanContext().SpanID() {
				t.Errorf("%s: SERVER span %q not a child of attempt %d", c.service, s.Name(), i)
			}
			if v, _ := attr(s, "rpc.grpc.status_code"); v.AsInt64() != int64(c.code) {
				t.Errorf("%s: server status %d", c.service, v.AsInt64())
			}
			v, ok := attr(s, "rpc.response.metadata.x-error-claim")
			if c.claim == "" && ok || c.claim != "" && v.AsStringSlice()[0] != c.claim {
				t.Errorf("%s: server captured claim %v", c.service, v.AsStringSlice())
			}
			if v, _ := attr(s, "error.claim"); v.AsString() != c.claim {
				t.Errorf("%s: error.claim %q", c.service, v.AsString())
			}
		}
		for i, cl := range clients {
			v, ok := attr(cl, "retry.attempt")
			if i == 0 && ok || i > 0 && v.AsInt64() != int64(i) {
				t.Errorf("%s: attempt %d: retry.attempt %v", c.service, i, v.AsInt64())
			}
			_, sup := attr(cl, "retry.suppressed")
			if sup != (c.claim == "unclaimed") {
				t.Errorf("%s: attempt %d: suppressed %v", c.service, i, sup)
			}
			_, met := attr(cl, "retry.criteria_satisfied")
			if met != (c.claim == "claimed") {
				t.Errorf("%s: attempt %d: criteria %v", c.service, i, met)
			}
		}
	}
}
