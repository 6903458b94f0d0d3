package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness check values (observability.md §2). CheckOK means the check
// passes; every other value names why it fails.
const (
	CheckOK = "ok"

	NATSDisconnected = "disconnected" // nats: the connection is down
	NATSConnecting   = "connecting"   // nats: not connected yet

	ConsumerNotBound     = "not_bound"     // consumer: not bound yet
	ConsumerFetchFailing = "fetch_failing" // consumer: ≥ 3 consecutive fetch failures

	SinkNotStarted = "not_started" // sink: not opened yet
	SinkUnhealthy  = "unhealthy"   // sink: in the destination-error state
)

// Readiness is the state /readyz reports. Each check is CheckOK or its
// failing value. An empty check counts as its start-up failure
// (NATSConnecting, ConsumerNotBound, SinkNotStarted), so a zero Readiness is
// "not ready", never "ready" by accident.
type Readiness struct {
	NATS, Consumer, Sink string
	// Targets holds one check per target of a fanout sink, by name
	// (reported as "target:<name>"): CheckOK, SinkNotStarted or
	// SinkUnhealthy (its destination circuit is open). They are reported
	// but do not decide readiness: a target required by some route makes
	// Sink unhealthy through the process-wide circuit, and an optional-only
	// target never makes the process unready.
	Targets map[string]string
	// Draining is true once shutdown began; it makes /readyz 503 "draining"
	// even while every check passes, so load balancers stop routing first.
	Draining bool
}

// Ready reports whether every check passes and the process is not draining.
func (r Readiness) Ready() bool {
	r = r.normalized()
	return !r.Draining && r.NATS == CheckOK && r.Consumer == CheckOK && r.Sink == CheckOK
}

func (r Readiness) normalized() Readiness {
	if r.NATS == "" {
		r.NATS = NATSConnecting
	}
	if r.Consumer == "" {
		r.Consumer = ConsumerNotBound
	}
	if r.Sink == "" {
		r.Sink = SinkNotStarted
	}
	return r
}

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Gatherer serves /metrics; nil means metrics.enabled is false and
	// /metrics answers 404 "metrics disabled".
	Gatherer prometheus.Gatherer
	// Ready reports readiness for /readyz; nil means a zero Readiness
	// (not ready). It is called once per request and must be cheap and safe
	// for concurrent use.
	Ready func() Readiness
	// Logger receives errors of the Prometheus handler; nil discards them.
	Logger *slog.Logger
}

// NewHandler returns the handler of the metrics/health endpoint
// (observability.md §2): /metrics, /healthz and /readyz for GET and HEAD,
// 405 for other methods on those paths, 404 for every other path.
func NewHandler(o HandlerOptions) http.Handler {
	var metrics http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "metrics disabled", http.StatusNotFound)
	})
	if o.Gatherer != nil {
		logger := o.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		metrics = promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
			ErrorLog:          promLogger{logger},
			ErrorHandling:     promhttp.ContinueOnError, // a broken collector must not hide the others
			EnableOpenMetrics: true,
		})
	}
	ready := o.Ready
	if ready == nil {
		ready = func() Readiness { return Readiness{} }
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h http.Handler
		switch r.URL.Path {
		case "/metrics":
			h = metrics
		case "/healthz":
			h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
			})
		case "/readyz":
			h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				serveReady(w, ready())
			})
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveReady writes the /readyz body. Every check is listed, passing or not,
// so a client sees the whole state in one response with a stable shape.
func serveReady(w http.ResponseWriter, rd Readiness) {
	rd = rd.normalized()
	status, code := "ready", http.StatusOK
	switch {
	case rd.Draining:
		status, code = "draining", http.StatusServiceUnavailable
	case !rd.Ready():
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	checks := map[string]any{"consumer": rd.Consumer, "nats": rd.NATS, "sink": rd.Sink}
	for n, c := range rd.Targets {
		if c == "" {
			c = SinkNotStarted
		}
		checks["target:"+n] = c
	}
	writeJSON(w, code, map[string]any{
		"checks": checks,
		"status": status,
	})
}

func writeJSON(w http.ResponseWriter, code int, v map[string]any) {
	body := append(jsonx.Marshal(v, jsonx.UTF8), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // probes must see the live state
	w.WriteHeader(code)
	w.Write(body)
}

// promLogger adapts slog to promhttp's error log.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Warn("metrics endpoint error", "component", "http", "error", fmt.Sprint(v...))
}

// A Server is the running metrics/health endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returned
}

// Listen binds addr (metrics.listen: "host:port", "[v6]:port", ":port") and
// serves h in a goroutine that Shutdown stops. A bind error is returned so
// the CLI can exit 1 (runtime §2 step 3).
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		// The net error names the address; the caller names its key.
		return nil, err
	}
	s := &Server{
		srv: &http.Server{
			Handler: h,
			// Slow or idle clients must not pin goroutines of an
			// operations endpoint forever.
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       60 * time.Second,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return s, nil
}

// Addr returns the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting connections, waits for active requests until ctx
// ends (then closes them), and returns once the serving goroutine is done.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		s.srv.Close()
	}
	<-s.done
	return err
}
