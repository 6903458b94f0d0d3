package custody

import (
	"crypto/ed25519"
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// The per-message costs of docs/performance.md#integrity: building the
// envelope and encoding its file record (what every message costs anyway),
// then verification and custody on top.

func BenchmarkBaselineEnvelopeAndFileRecord(b *testing.B) {
	m := shapestest.GoldenMessage()
	b.ReportAllocs()
	for b.Loop() {
		e := intake.Build(m, nil, shapestest.Received)
		p, _ := record.NormalisePayload(e, record.JSONOrEnvelope)
		_ = jsonx.Marshal(record.FileRecord(e, p, true, shapestest.Stored), jsonx.UTF8)
	}
}

func BenchmarkCustodySHA256(b *testing.B) {
	e := shapestest.Golden()
	s := c1
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Compute(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCustodySHA256Tree is the previous Compute (treeCompute: every
// input built as a tree and encoded), the baseline of
// BenchmarkCustodySHA256.
func BenchmarkCustodySHA256Tree(b *testing.B) {
	e := shapestest.Golden()
	s := c1
	b.ReportAllocs()
	for b.Loop() {
		if _, err := treeCompute(&s, e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCustodySHA512(b *testing.B) {
	e := shapestest.Golden()
	s := c1
	s.Algorithm = "sha512"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Compute(e); err != nil {
			b.Fatal(err)
		}
	}
}

func authPolicy(alg string, key []byte) *authenticity.Policy {
	return &authenticity.Policy{SignatureHeader: authenticity.DefaultSignatureHeader, AlgorithmHeader: authenticity.DefaultAlgorithmHeader,
		KeyIDHeader: authenticity.DefaultKeyIDHeader, Rules: []authenticity.Rule{{Subject: ">", Algorithm: alg,
			Keys: []authenticity.Key{{ID: "k", Material: key}}, SignedFields: authenticity.DefaultSignedFields}}}
}

func BenchmarkVerifyHMAC(b *testing.B) {
	key := make([]byte, 32)
	m := shapestest.GoldenMessage()
	m.Header = map[string][]string{"Nats-Msg-Id": {"O-1001"}, authenticity.DefaultAlgorithmHeader: {"hmac-sha256"}, authenticity.DefaultKeyIDHeader: {"k"},
		authenticity.DefaultSignatureHeader: {"dulXuBj79ahXqHrjEioA/ABP8g0Ad3Aa/U8MY+fmCq8="}}
	e := intake.Build(m, nil, shapestest.Received)
	p := authPolicy(authenticity.HMACSHA256, key)
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Check(e)
	}
}

func BenchmarkVerifyEd25519(b *testing.B) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	m := shapestest.GoldenMessage()
	e := intake.Build(m, nil, shapestest.Received)
	doc := authenticity.Canonical(e, authenticity.Ed25519, "k", authenticity.DefaultSignedFields)
	sig := ed25519.Sign(priv, doc)
	m.Header = map[string][]string{"Nats-Msg-Id": {"O-1001"}, authenticity.DefaultAlgorithmHeader: {"ed25519"}, authenticity.DefaultKeyIDHeader: {"k"},
		authenticity.DefaultSignatureHeader: {base64.StdEncoding.EncodeToString(sig)}}
	e = intake.Build(m, nil, shapestest.Received)
	p := authPolicy(authenticity.Ed25519, priv.Public().(ed25519.PublicKey))
	if v := p.Check(e); !v.Accepted {
		b.Fatalf("Check = %+v", v)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Check(e)
	}
}

// BenchmarkCustodyAlternating times Compute and the previous Compute
// (treeCompute) on the golden envelope in alternating rounds of b.N calls
// each, so that both see the same machine load, and reports each one's
// median ns/op and the median of the per-round ratio tree/fast (how many
// times faster Compute is).
func BenchmarkCustodyAlternating(b *testing.B) {
	e := shapestest.Golden()
	s := c1
	round := func(f func(*Settings, *sink.Envelope) (*sink.Custody, error)) float64 {
		start := time.Now()
		for range b.N {
			if _, err := f(&s, e); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	var fast, tree, ratio []float64
	for range 9 {
		f := round((*Settings).Compute)
		t := round(treeCompute)
		fast, tree, ratio = append(fast, f), append(tree, t), append(ratio, t/f)
	}
	b.ReportMetric(median(fast), "fast-ns/op")
	b.ReportMetric(median(tree), "tree-ns/op")
	b.ReportMetric(median(ratio), "tree/fast")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
