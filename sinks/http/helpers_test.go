package httpsink

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/backoff/backofftest"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// request is one request an endpoint received.
type request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// endpoint is an httptest server that records every request and answers
// with handle (nil: 200 with an empty body). n counts requests from 0.
type endpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	handle func(w http.ResponseWriter, r *http.Request, n int)
}

func newEndpoint(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, n int)) *endpoint {
	t.Helper()
	ep := &endpoint{handle: handle}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ep.mu.Lock()
		n := len(ep.reqs)
		ep.reqs = append(ep.reqs, request{r.Method, r.URL.Path, r.Header.Clone(), body})
		ep.mu.Unlock()
		if ep.handle != nil {
			ep.handle(w, r, n)
		}
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *endpoint) requests() []request {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]request(nil), ep.reqs...)
}

// config returns the default configuration aimed at the endpoint.
func (ep *endpoint) config() Config {
	c := Default()
	c.URL = ep.srv.URL + "/ingest"
	c.AllowHTTPForLocalTesting = true
	return c
}

// open starts a sink on c with a fixed clock and recorded, instant retry
// delays, and stops it when the test ends. Its deps give it tracing (spans
// only in a traced write context) and nothing else.
func open(t testing.TB, c Config) (*Sink, *backofftest.Recorder) {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps (a tracer is added when deps has none).
func openWith(t testing.TB, c Config, deps sink.Deps) (*Sink, *backofftest.Recorder) {
	t.Helper()
	if deps.Tracer == nil {
		deps.Tracer = tracing.ForSinks()
	}
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sl := &backofftest.Recorder{}
	s.sleep = sl.Sleep
	s.jitter = func() float64 { return 0.5 }
	s.now = func() time.Time { return shapestest.Stored }
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s, sl
}

// res is a comparable summary of a sink.Result.
type res struct {
	Outcome   sink.Outcome
	ErrorType string
	Err       string
}

func summarize(rs []sink.Result) []res {
	out := make([]res, len(rs))
	for i, r := range rs {
		out[i] = res{Outcome: r.Outcome, ErrorType: r.ErrorType}
		if r.Err != nil {
			out[i].Err = r.Err.Error()
		}
	}
	return out
}

func status(code int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(code) }
}
