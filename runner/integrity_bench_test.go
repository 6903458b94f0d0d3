package runner

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// integrityRate is pipelineRate over n signed messages (one payload, no
// message id, so one signature per algorithm serves them all).
func integrityRate(b *testing.B, n int, alg string, sig string, setup func(*Runner)) float64 {
	b.Helper()
	s := natstest.RunJetStream(b)
	nc, js := natstest.Connect(b, s)
	natstest.CreateStream(b, js, jetstream.StreamConfig{Name: testStream, Subjects: []string{"orders.>"}})
	ctx := context.Background()
	for i := 0; i < n; i++ {
		h := nats.Header{authenticity.DefaultAlgorithmHeader: {alg}, authenticity.DefaultKeyIDHeader: {"k"}, authenticity.DefaultSignatureHeader: {sig}}
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "orders.created", Data: benchPayload, Header: h}); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 { // stay under the client's outstanding-publish limit
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publish did not complete")
			}
		}
	}
	c, _, err := EnsureConsumer(ctx, js, ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>",
		AckWait: new(time.Minute), MaxAckPending: new(4*benchBatch + benchBatch)})
	if err != nil {
		b.Fatal(err)
	}
	m := newMetricsB(b)
	r := &Runner{Consumer: c, Conn: nc, Sink: nullSink{}, BatchSize: benchBatch, MaxInFlight: 4, Metrics: m, BatchTimeout: 100 * time.Millisecond}
	setup(r)
	rctx, cancel := context.WithCancel(ctx)
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	for m.MessagesAcked.Value()+m.AckErrors.Value() < uint64(n) {
		if m.MessagesFailed.Value() > 0 {
			b.Fatalf("%d messages failed", m.MessagesFailed.Value())
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(begin)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(n) / elapsed.Seconds()
}

var benchPayload = func() []byte {
	p := make([]byte, 256)
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return p
}()

// BenchmarkPipelineIntegrity compares, in alternating rounds of b.N
// messages on the null sink (in flight 4): integrity off, custody (sha256),
// HMAC-SHA256 verification, Ed25519 verification, and Ed25519 with custody.
// Reported: the median msgs/s of each and the median ratio to "off" of the
// same round (docs/performance.md#message-authenticity-and-custody).
func BenchmarkPipelineIntegrity(b *testing.B) {
	hkey := make([]byte, 32)
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	probe := intake.Build(intake.Message{Subject: "orders.created", Data: benchPayload}, nil, time.Now())
	hdoc := authenticity.Canonical(probe, authenticity.HMACSHA256, "k", authenticity.DefaultSignedFields)
	mac := hmac.New(sha256.New, hkey)
	mac.Write(hdoc)
	hsig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	esig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, authenticity.Canonical(probe, authenticity.Ed25519, "k", authenticity.DefaultSignedFields)))
	policy := func(alg string, key []byte) func(*sink.Envelope) (error, error) {
		p := &authenticity.Policy{SignatureHeader: authenticity.DefaultSignatureHeader, AlgorithmHeader: authenticity.DefaultAlgorithmHeader,
			KeyIDHeader: authenticity.DefaultKeyIDHeader, Rules: []authenticity.Rule{{Subject: ">", Algorithm: alg,
				Keys: []authenticity.Key{{ID: "k", Material: key}}, SignedFields: authenticity.DefaultSignedFields}}}
		return func(e *sink.Envelope) (error, error) {
			if v := p.Check(e); !v.Accepted {
				return v.Error(e.Subject), nil
			}
			return nil, nil
		}
	}
	cs := &custody.Settings{Algorithm: "sha256", HashPayload: true, HashMetadata: true, MaxHashInputBytes: 1 << 24}
	custodyHook := func(e *sink.Envelope) error {
		c, err := cs.Compute(e)
		e.Custody = c
		return err
	}
	type variant struct {
		name, alg, sig string
		setup          func(*Runner)
	}
	variants := []variant{
		{"off", authenticity.HMACSHA256, hsig, func(*Runner) {}},
		{"custody", authenticity.HMACSHA256, hsig, func(r *Runner) { r.Custody = custodyHook }},
		{"hmac", authenticity.HMACSHA256, hsig, func(r *Runner) { r.Authenticate = policy(authenticity.HMACSHA256, hkey) }},
		{"ed25519", authenticity.Ed25519, esig, func(r *Runner) { r.Authenticate = policy(authenticity.Ed25519, priv.Public().(ed25519.PublicKey)) }},
		{"ed25519+custody", authenticity.Ed25519, esig, func(r *Runner) {
			r.Authenticate = policy(authenticity.Ed25519, priv.Public().(ed25519.PublicKey))
			r.Custody = custodyHook
		}},
	}
	rates := make([][]float64, len(variants))
	ratios := make([][]float64, len(variants))
	for range 3 {
		var off float64
		for i, v := range variants {
			rate := integrityRate(b, b.N, v.alg, v.sig, v.setup)
			if i == 0 {
				off = rate
			}
			rates[i] = append(rates[i], rate)
			ratios[i] = append(ratios[i], rate/off)
		}
	}
	for i, v := range variants {
		b.ReportMetric(median(rates[i]), v.name+"-msgs/s")
		if i > 0 {
			b.ReportMetric(median(ratios[i]), v.name+"/off")
		}
	}
}
