package tracing_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// BenchmarkBatch measures what tracing adds to the runner's hot path per
// message: a batch of 100 message spans, one write span and the ACK events.
// Export happens on the batch processor's goroutine (to io.Discard here) and
// is not on this path; spans it cannot keep up with are dropped.
func BenchmarkBatch(b *testing.B) {
	for _, bc := range []struct {
		name    string
		enabled bool
		ratio   float64
		header  nats.Header
	}{
		{"disabled", false, 1, nil},
		{"sampled stdout", true, 1, nats.Header{"traceparent": {traceparent}}},
		{"sampled otlp-http", true, 1, nats.Header{"traceparent": {traceparent}}},
		{"parent not sampled", true, 1, nats.Header{"traceparent": {"00-" + producerTrace + "-" + producerSpan + "-00"}}},
		{"root ratio 0", true, 0, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := tracingConfig(tracing.ExporterStdout, "")
			if strings.HasSuffix(bc.name, "otlp-http") {
				// A collector that reads and discards: the cost measured is
				// ours (protobuf encoding and the request), not a decoder's.
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/x-protobuf")
				}))
				defer srv.Close()
				cfg = tracingConfig(tracing.ExporterOTLPHTTP, srv.URL)
			}
			cfg.Enabled = bc.enabled
			cfg.SampleRatio = bc.ratio
			o := options(nil)
			o.Stdout = io.Discard
			tr, err := tracing.New(b.Context(), cfg, o)
			if err != nil {
				b.Fatal(err)
			}
			envs := make([]*sink.Envelope, 100)
			res := make([]sink.Result, len(envs))
			for i := range envs {
				envs[i] = envelope(uint64(i+1), bc.header)
				res[i] = sink.Ok
			}
			b.ReportAllocs()
			before := cpuTime()
			for b.Loop() {
				bt := tr.StartBatch(b.Context(), "0123456789abcdef", envs)
				_, w := bt.StartWrite(b.Context(), envs, 0)
				w.Results(res)
				w.End()
				for i := range envs {
					s := bt.Span(i)
					s.SetOutcome(tracing.OutcomeCommitted)
					s.Ack(nil)
					s.End()
				}
			}
			// Flush so the export work of these spans is counted: on a shared
			// machine process CPU time says more than wall time.
			_ = tr.Shutdown(b.Context())
			b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N*len(envs)), "cpu-ns/msg")
		})
	}
}

// cpuTime returns the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
