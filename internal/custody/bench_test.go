package custody

import (
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
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
