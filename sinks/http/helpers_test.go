package httpsink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
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

var (
	goldenReceived = time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)
	goldenStored   = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)
)

// goldenEnvelope is the input of data-shapes §7.2.
func goldenEnvelope() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "orders.created",
		Reply:   "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3",
		Data:    []byte(`{"order_id":"O-1001","amount":42.50,"note":"café"}`),
		Header: map[string][]string{
			"Nats-Msg-Id":         {"O-1001"},
			"Nats-Sinks-Priority": {"high"},
			"Nats-Sinks-Labels":   {"billing; eu ;billing"},
			"Nats-Time-Stamp":     {"2026-05-29T09:59:59.5Z"},
			"traceparent":         {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		},
	}, nil, goldenReceived)
}

// envelope returns a message of stream seq with a small JSON body.
func envelope(stream string, seq uint64) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	return intake.Build(intake.Message{Subject: "t.x", Reply: reply, Data: fmt.Appendf(nil, `{"n":%d}`, seq)}, nil, goldenReceived)
}

func batchOf(stream string, n int) []*sink.Envelope {
	b := make([]*sink.Envelope, n)
	for i := range b {
		b[i] = envelope(stream, uint64(i+1))
	}
	return b
}

// sleeps records the retry delays a sink asked for, without waiting.
type sleeps struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

// open starts a sink on c with a fixed clock and recorded, instant retry
// delays, and stops it when the test ends.
func open(t testing.TB, c Config) (*Sink, *sleeps) {
	t.Helper()
	s, err := New(context.Background(), c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sl := &sleeps{}
	s.sleep = sl.sleep
	s.jitter = func() float64 { return 0.5 }
	s.now = func() time.Time { return goldenStored }
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
