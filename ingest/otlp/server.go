package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"

	"github.com/stormradius/stormradius/bearer"
	"github.com/stormradius/stormradius/pipeline"
)

// Server runs the OTLP gRPC and HTTP trace receivers in front of one
// pipeline.Consumer.
//
// The spans slice passed to Consume is reused once Consume returns (as
// io.Writer's p is): a Consumer that keeps spans past the call copies them.
// The one exception is a Consume that returns because its context is done:
// whatever it handed the spans to may still be reading them, so that slice
// is never reused. The strings in the spans are immutable and may be kept.
type Server struct {
	cfg      Config
	consumer pipeline.Consumer
	log      *slog.Logger
	metrics  *metrics
	auth     *bearer.Tokens
	tls      *tls.Config

	slots     chan struct{} // MaxInflightRequests admission tokens
	budget    bodyBudget    // BodyBufferBytes
	works     sync.Pool     // *work
	refuseLog [nProtocols][nRefusals]rateLimit
	tlsLog    [nProtocols][nTLSRefusals]rateLimit // client certificates refused
	rejectLog [nProtocols]rateLimit               // partial successes

	grpc *grpc.Server
	http *http.Server

	mu           sync.Mutex
	started      bool
	stopped      bool
	grpcLn       net.Listener
	httpLn       net.Listener
	errc         chan error // serve errors, one per receiver at most
	shutdownOnce sync.Once
	shutdownErr  error
}

// New returns a Server that feeds consumer, configured by cfg. It loads the
// TLS certificate and registers the metrics, but listens only on Start.
func New(cfg Config, consumer pipeline.Consumer) (*Server, error) {
	if consumer == nil {
		return nil, errors.New("otlp: nil consumer")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		consumer: consumer,
		log:      cfg.Logger,
		metrics:  m,
		auth:     bearer.New(cfg.BearerTokens),
		tls:      tlsCfg,
		slots:    make(chan struct{}, cfg.MaxInflightRequests),
		budget:   bodyBudget{max: cfg.BodyBufferBytes},
		errc:     make(chan error, 2),
	}

	opts := []grpc.ServerOption{
		// Export requests arrive as their bytes, for the ingest.Decoder.
		grpc.ForceServerCodecV2(grpcCodec{proto: encoding.GetCodecV2(encproto.Name)}),
		grpc.MaxRecvMsgSize(int(cfg.MaxBodyBytes)),
		// Per connection: a Collector sends over one connection, and its
		// requests beyond this wait for a stream rather than pile up
		// decoded in memory.
		grpc.MaxConcurrentStreams(uint32(cfg.MaxInflightRequests)),
		grpc.StatsHandler(grpcStats{s: s}),
	}
	if s.auth != nil {
		opts = append(opts, grpc.InTapHandle(s.tapAuth))
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.verifyingClients(tlsCfg, protoGRPC))))
	}
	s.grpc = grpc.NewServer(opts...)
	s.grpc.RegisterService(&grpcServiceDesc, &grpcService{s: s})

	s.http = &http.Server{
		Handler: httpHandler{s: s},
		// Slow-loris protection; bodies may take longer (a 20 MiB upload
		// on a slow link), so there is no ReadTimeout.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	if tlsCfg != nil {
		s.http.TLSConfig = s.verifyingClients(tlsCfg, protoHTTP)
	}
	return s, nil
}

// Handler returns the OTLP/HTTP receiver as an http.Handler (authentication
// included), to mount on another server instead of listening on HTTPAddr.
func (s *Server) Handler() http.Handler { return httpHandler{s: s} }

// Start listens on the configured addresses and serves in the background.
// It returns once both listeners are bound (an error if either cannot be),
// so GRPCAddr and HTTPAddr are known when it returns. ctx bounds only the
// listening; stop the Server with Shutdown.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("otlp: server already started")
	}
	if s.stopped {
		return errors.New("otlp: server shut down")
	}
	var lc net.ListenConfig
	if !s.cfg.DisableGRPC {
		ln, err := lc.Listen(ctx, "tcp", s.cfg.GRPCAddr)
		if err != nil {
			return fmt.Errorf("otlp: listen for gRPC on %s: %w", s.cfg.GRPCAddr, err)
		}
		s.grpcLn = ln
	}
	if !s.cfg.DisableHTTP {
		ln, err := lc.Listen(ctx, "tcp", s.cfg.HTTPAddr)
		if err != nil {
			if s.grpcLn != nil {
				s.grpcLn.Close()
				s.grpcLn = nil
			}
			return fmt.Errorf("otlp: listen for HTTP on %s: %w", s.cfg.HTTPAddr, err)
		}
		s.httpLn = ln
	}
	s.started = true

	if s.grpcLn != nil {
		ln := s.grpcLn
		go func() {
			// Serve returns nil after Stop or GracefulStop.
			if err := s.grpc.Serve(ln); err != nil {
				s.serveFailed(fmt.Errorf("otlp: gRPC receiver on %s: %w", ln.Addr(), err))
			}
		}()
	}
	if s.httpLn != nil {
		ln := s.httpLn
		go func() {
			var err error
			if s.tls != nil {
				err = s.http.ServeTLS(ln, "", "") // certificates from TLSConfig; enables HTTP/2
			} else {
				err = s.http.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				s.serveFailed(fmt.Errorf("otlp: HTTP receiver on %s: %w", ln.Addr(), err))
			}
		}()
	}
	s.log.Info("otlp: receivers listening",
		"grpc", addrString(s.grpcLn), "http", addrString(s.httpLn),
		"tls", s.tls != nil, "auth", s.auth != nil,
		"max_body_bytes", s.cfg.MaxBodyBytes, "max_inflight_requests", s.cfg.MaxInflightRequests)
	return nil
}

// serveFailed reports a receiver that stopped serving on its own: logged
// for Start's callers, returned by Serve.
func (s *Server) serveFailed(err error) {
	s.log.Error("otlp: receiver failed", "err", err)
	s.errc <- err // buffered for both receivers: never blocks
}

// Serve starts the Server if Start was not called, then serves until ctx
// is done, when it shuts down gracefully within ShutdownTimeout, or until a
// receiver fails, when it stops the other and returns the failure. It
// returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-s.errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, s.Shutdown(sctx))
}

// Shutdown stops accepting requests and waits for those in flight to be
// answered (their Consume calls to return). When ctx is done first it
// closes every connection and returns ctx's error. Calling it again returns
// the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var wg sync.WaitGroup
	var httpErr, grpcErr error
	wg.Go(func() {
		if err := s.http.Shutdown(ctx); err != nil {
			s.http.Close() // the deadline passed: drop what is left
			httpErr = fmt.Errorf("otlp: HTTP receiver shutdown: %w", err)
		}
	})
	wg.Go(func() {
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop() // cancels the RPCs left; GracefulStop then returns
			<-done
			grpcErr = fmt.Errorf("otlp: gRPC receiver shutdown: %w", ctx.Err())
		}
	})
	wg.Wait()
	err := errors.Join(httpErr, grpcErr)
	if err != nil {
		s.log.Warn("otlp: receivers stopped before in-flight requests finished", "err", err)
	} else {
		s.log.Info("otlp: receivers stopped")
	}
	return err
}

// GRPCAddr returns the address the gRPC receiver listens on, nil before
// Start or when it is disabled.
func (s *Server) GRPCAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpcLn == nil {
		return nil
	}
	return s.grpcLn.Addr()
}

// HTTPAddr returns the address the HTTP receiver listens on, nil before
// Start or when it is disabled.
func (s *Server) HTTPAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

func addrString(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}
