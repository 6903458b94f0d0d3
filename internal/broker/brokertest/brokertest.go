// Package brokertest holds the hand-written fakes and fixtures the broker
// sinks' tests share: a sink.Metrics that counts in memory, a sink.Tracer
// that records the spans a sink starts, a log capture, and throw-away TLS
// certificates.
package brokertest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// Metrics is a sink.Metrics keeping every instrument in memory.
type Metrics struct {
	mu     sync.Mutex
	counts map[string]int
	gauges map[string]float64
	obs    map[string]int
}

var _ sink.Metrics = (*Metrics)(nil)

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{counts: map[string]int{}, gauges: map[string]float64{}, obs: map[string]int{}}
}

// Count returns a counter's value.
func (m *Metrics) Count(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

// Gauge returns a gauge's value.
func (m *Metrics) GaugeValue(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gauges[name]
}

// Observations returns how many values a histogram observed.
func (m *Metrics) Observations(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.obs[name]
}

type instrument struct {
	m    *Metrics
	name string
}

func (i instrument) Add(n int) {
	i.m.mu.Lock()
	i.m.counts[i.name] += n
	i.m.mu.Unlock()
}

func (i instrument) Set(v float64) {
	i.m.mu.Lock()
	i.m.gauges[i.name] = v
	i.m.mu.Unlock()
}

func (i instrument) Observe(float64) {
	i.m.mu.Lock()
	i.m.obs[i.name]++
	i.m.mu.Unlock()
}

// Counter returns the counter named name.
func (m *Metrics) Counter(name, _ string) (sink.Counter, error) { return instrument{m, name}, nil }

// Gauge returns the gauge named name.
func (m *Metrics) Gauge(name, _ string) (sink.Gauge, error) { return instrument{m, name}, nil }

// Histogram returns the histogram named name.
func (m *Metrics) Histogram(name, _ string, _ []float64) (sink.Histogram, error) {
	return instrument{m, name}, nil
}

// Span is one span a sink started through Tracer.
type Span struct {
	Name        string
	Producer    bool
	Subject     string
	Seq         uint64
	Attrs       map[string]any
	Traceparent string
	FailedAs    string
	Ended       bool
}

// Tracer is a sink.Tracer that records spans. Each span gets its own
// traceparent (trace id of the message's own, when it has one), which
// TraceHeaders returns for it.
type Tracer struct {
	mu    sync.Mutex
	spans []*Span
}

var _ sink.Tracer = (*Tracer)(nil)

type spanKey struct{}

// StartClient records a span and returns a context carrying it.
func (tr *Tracer) StartClient(ctx context.Context, e *sink.Envelope, name string, producer bool, attrs ...sink.Attr) (context.Context, sink.Span) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := &Span{Name: name, Producer: producer, Subject: e.Subject, Seq: e.StreamSequence, Attrs: map[string]any{}}
	for _, a := range attrs {
		s.Attrs[a.Key] = a.Value
	}
	s.Traceparent = fmt.Sprintf("00-%032x-%016x-01", 0xabc, len(tr.spans)+1)
	tr.spans = append(tr.spans, s)
	return context.WithValue(ctx, spanKey{}, s), recorded{tr, s}
}

// TraceHeaders returns the traceparent of the span in ctx, with the
// message's tracestate and baggage; without a span, e's own headers.
func (tr *Tracer) TraceHeaders(ctx context.Context, e *sink.Envelope) map[string]string {
	out := map[string]string{}
	for _, n := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := e.Headers.Get(n); ok {
			out[n] = v
		}
	}
	if s, ok := ctx.Value(spanKey{}).(*Span); ok {
		out["traceparent"] = s.Traceparent
	}
	return out
}

// Spans returns copies of the recorded spans.
func (tr *Tracer) Spans() []Span {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]Span, len(tr.spans))
	for i, s := range tr.spans {
		out[i] = *s
	}
	return out
}

type recorded struct {
	tr *Tracer
	s  *Span
}

func (r recorded) SetAttributes(attrs ...sink.Attr) {
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	for _, a := range attrs {
		r.s.Attrs[a.Key] = a.Value
	}
}

func (r recorded) Fail(errorType string, _ error) {
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	r.s.FailedAs = errorType
}

func (r recorded) End() {
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	r.s.Ended = true
}

// Logs captures log lines; safe for concurrent use.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger returns a text logger writing to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Certs are PEM files of a throw-away CA, a server certificate it signed for
// 127.0.0.1 and localhost, and a client certificate it signed.
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewCerts writes a fresh CA, server and client certificate into t's temp
// directory.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats-sink test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	}
	c := Certs{
		CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	writePEM(t, c.CA, "CERTIFICATE", caDER)
	leaf(2, "localhost", x509.ExtKeyUsageServerAuth, c.ServerCert, c.ServerKey)
	leaf(3, "nats-sink", x509.ExtKeyUsageClientAuth, c.ClientCert, c.ClientKey)
	return c
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
