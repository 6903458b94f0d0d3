package httpsink

import (
	"net"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestResponsesTotal scrapes http_responses_total{class} from a Prometheus
// registry after requests answered 2xx, 3xx, 4xx and 5xx, and one that got
// no HTTP response at all (transport_error).
func TestResponsesTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewMetrics(reg, "ns")
	if err != nil {
		t.Fatal(err)
	}
	codes := []int{200, 204, 302, 400, 404, 503, 500}
	ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		w.WriteHeader(codes[n%len(codes)])
	})
	c := ep.config()
	c.Concurrency = 1
	s, _ := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
	for range codes {
		// One message per write: with concurrency 1 a temporary or
		// destination answer would leave the rest of a batch unsent.
		s.WriteBatch(t.Context(), shapestest.Batch("S", 1))
	}

	// A closed port: the request gets no response.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c2 := Default()
	c2.URL = "http://" + addr + "/x"
	c2.AllowHTTPForLocalTesting = true
	s2, _ := openWith(t, c2, sink.Deps{Metrics: m.ForSinks()})
	s2.WriteBatch(t.Context(), shapestest.Batch("S", 1))

	want := map[string]float64{"2xx": 2, "3xx": 1, "4xx": 2, "5xx": 2, "transport_error": 1}
	if diff := cmp.Diff(want, scrapeByLabel(t, reg, "ns_http_responses_total", "class")); diff != "" {
		t.Errorf("ns_http_responses_total by class (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(7, len(ep.requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// scrapeByLabel gathers reg and returns the counter family name's values
// by the value of label.
func scrapeByLabel(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
