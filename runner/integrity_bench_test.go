package runner

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
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
// messages on the null sink: integrity off, custody (sha256), HMAC-SHA256
// verification and Ed25519 verification, each verification once with the
// batch checked sequentially ("-seq": one goroutine, as before checkAll)
// and once in parallel (up to GOMAXPROCS goroutines), with one batch in
// flight (the default) and with four. Reported: the median msgs/s of each
// and the median ratio to "off" of the same round and in-flight setting
// (docs/performance.md#message-authenticity-and-custody).
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
		inFlight       int
		sequential     bool
		setup          func(*Runner)
	}
	hmacAuth := func(r *Runner) { r.Authenticate = policy(authenticity.HMACSHA256, hkey) }
	edAuth := func(r *Runner) { r.Authenticate = policy(authenticity.Ed25519, priv.Public().(ed25519.PublicKey)) }
	var variants []variant
	for _, inFlight := range []int{1, 4} {
		suffix := fmt.Sprintf("@%d", inFlight)
		variants = append(variants,
			variant{"off" + suffix, authenticity.HMACSHA256, hsig, inFlight, false, func(*Runner) {}},
			variant{"custody" + suffix, authenticity.HMACSHA256, hsig, inFlight, false, func(r *Runner) { r.Custody = custodyHook }},
			variant{"hmac-seq" + suffix, authenticity.HMACSHA256, hsig, inFlight, true, hmacAuth},
			variant{"hmac" + suffix, authenticity.HMACSHA256, hsig, inFlight, false, hmacAuth},
			variant{"ed25519-seq" + suffix, authenticity.Ed25519, esig, inFlight, true, edAuth},
			variant{"ed25519" + suffix, authenticity.Ed25519, esig, inFlight, false, edAuth},
		)
	}
	procs := gomaxprocs
	defer func() { gomaxprocs = procs }()
	rates := make([][]float64, len(variants))
	ratios := make([][]float64, len(variants))
	for range 3 {
		var off float64
		for i, v := range variants {
			gomaxprocs = procs
			if v.sequential {
				gomaxprocs = func() int { return 1 }
			}
			rate := integrityRate(b, b.N, v.alg, v.sig, func(r *Runner) {
				r.MaxInFlight = v.inFlight
				v.setup(r)
			})
			if strings.HasPrefix(v.name, "off@") {
				off = rate
			}
			rates[i] = append(rates[i], rate)
			ratios[i] = append(ratios[i], rate/off)
		}
	}
	for i, v := range variants {
		b.ReportMetric(median(rates[i]), v.name+"-msgs/s")
		if !strings.HasPrefix(v.name, "off@") {
			b.ReportMetric(median(ratios[i]), v.name+"/off")
		}
	}
}

// BenchmarkCheckAllEd25519 times checkAll over a batch of b.N Ed25519
// signed envelopes, sequentially (one goroutine, as before checkAll) and
// in parallel (up to GOMAXPROCS) in alternating rounds, without a server:
// the verification step alone. Reported: the median ns per message of
// each and the median per-round ratio seq/parallel.
func BenchmarkCheckAllEd25519(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	probe := intake.Build(intake.Message{Subject: "orders.created", Data: benchPayload}, nil, time.Now())
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, authenticity.Canonical(probe, authenticity.Ed25519, "k", authenticity.DefaultSignedFields)))
	p := &authenticity.Policy{SignatureHeader: authenticity.DefaultSignatureHeader, AlgorithmHeader: authenticity.DefaultAlgorithmHeader,
		KeyIDHeader: authenticity.DefaultKeyIDHeader, Rules: []authenticity.Rule{{Subject: ">", Algorithm: authenticity.Ed25519,
			Keys: []authenticity.Key{{ID: "k", Material: priv.Public().(ed25519.PublicKey)}}, SignedFields: authenticity.DefaultSignedFields}}}
	hook := func(e *sink.Envelope) (error, error) {
		if v := p.Check(e); !v.Accepted {
			return v.Error(e.Subject), nil
		}
		return nil, nil
	}
	envs := make([]*sink.Envelope, benchBatch)
	for i := range envs {
		envs[i] = intake.Build(intake.Message{Subject: "orders.created", Data: benchPayload, Header: nats.Header{
			authenticity.DefaultAlgorithmHeader: {"ed25519"}, authenticity.DefaultKeyIDHeader: {"k"}, authenticity.DefaultSignatureHeader: {sig}}}, nil, time.Now())
	}
	procs := gomaxprocs
	defer func() { gomaxprocs = procs }()
	round := func(seq bool) float64 {
		gomaxprocs = procs
		if seq {
			gomaxprocs = func() int { return 1 }
		}
		start := time.Now()
		for done := 0; done < b.N; done += len(envs) {
			for _, v := range checkAll(envs, hook) {
				if v.reject != nil || v.err != nil {
					b.Fatal(v.reject, v.err)
				}
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(max(b.N, len(envs)))
	}
	var seqNS, parNS, ratio []float64
	for range 7 {
		s, p := round(true), round(false)
		seqNS, parNS, ratio = append(seqNS, s), append(parNS, p), append(ratio, s/p)
	}
	b.ReportMetric(median(seqNS), "seq-ns/msg")
	b.ReportMetric(median(parNS), "parallel-ns/msg")
	b.ReportMetric(median(ratio), "seq/parallel")
}
