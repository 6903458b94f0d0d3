package runner

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// producerSign is an independent producer: the signed document built from
// the documented text with the standard library only (encoding/json sorts
// map keys), signed with crypto/hmac.
func producerSign(key []byte, keyID, subject, msgID string, body []byte) string {
	sum := sha256.Sum256(body)
	doc := map[string]any{"schema": "nats_sinks.message_authenticity.v1", "version": 1, "algorithm": "hmac-sha256",
		"key_id": keyID, "payload_sha256": hex.EncodeToString(sum[:]),
		"metadata": map[string]any{"subject": subject, "message_id": msgID}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
	m := hmac.New(sha256.New, key)
	m.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func signedHeader(alg, keyID, sig string) nats.Header {
	h := nats.Header{}
	if alg != "" {
		h.Set(authenticity.DefaultAlgorithmHeader, alg)
	}
	if keyID != "" {
		h.Set(authenticity.DefaultKeyIDHeader, keyID)
	}
	if sig != "" {
		h.Set(authenticity.DefaultSignatureHeader, sig)
	}
	return h
}

// TestAuthenticityAndCustody runs a real consumer with both features on, in
// both isolation modes: signed messages are stored with a custody document
// that verifies from the stored bytes alone; each tampered or unsigned one
// is dead-lettered as PolicyViolationError with its own reason, never
// stored, and acknowledged after its PubAck.
//
// With copies > 1 the eight cases repeat (distinct message ids) in one
// batch large enough to be verified by several goroutines (checkAll): the
// verdicts, dead letters and counters are those of the sequential check.
func TestAuthenticityAndCustody(t *testing.T) {
	for _, iso := range []string{IsolationMessage, IsolationBatch} {
		t.Run(iso, func(t *testing.T) { testAuthenticityAndCustody(t, iso, 1) })
		t.Run(iso+"/parallel", func(t *testing.T) {
			if authWorkers(8*6, runtime.GOMAXPROCS(0)) < 2 {
				t.Logf("GOMAXPROCS=%d: the batch is checked by one goroutine", runtime.GOMAXPROCS(0))
			}
			testAuthenticityAndCustody(t, iso, 6)
		})
	}
}

func testAuthenticityAndCustody(t *testing.T, iso string, copies int) {
	k1 := bytes.Repeat([]byte{1}, 32)
	other := bytes.Repeat([]byte{2}, 32)
	e := newEnv(t, true)
	c := e.consumer(ConsumerSpec{})

	type msg struct {
		id, body string
		header   nats.Header
		reason   string // "" = stored
	}
	sig := func(key []byte, keyID, id, body string) string {
		return producerSign(key, keyID, "orders.created", id, []byte(body))
	}
	var msgs []msg
	for c := range copies {
		id := func(n int) string { return fmt.Sprintf("O-%d-%d", c, n) }
		msgs = append(msgs, []msg{
			{id(1), `{"n":1}`, signedHeader("hmac-sha256", "k1", sig(k1, "k1", id(1), `{"n":1}`)), ""},
			{id(2), `{"n":3}`, signedHeader("hmac-sha256", "k1", sig(k1, "k1", id(2), `{"n":2}`)), authenticity.ReasonSignatureInvalid},    // flipped payload byte
			{id(3), `{"n":3}`, signedHeader("hmac-sha256", "k1", sig(k1, "k1", "O-X", `{"n":3}`)), authenticity.ReasonSignatureInvalid},    // flipped covered header
			{id(4), `{"n":4}`, signedHeader("hmac-sha256", "k1", sig(other, "k1", id(4), `{"n":4}`)), authenticity.ReasonSignatureInvalid}, // wrong key
			{id(5), `{"n":5}`, signedHeader("hmac-sha256", "k1", ""), authenticity.ReasonSignatureMissing},
			{id(6), `{"n":6}`, signedHeader("hmac-sha256", "k9", sig(k1, "k9", id(6), `{"n":6}`)), authenticity.ReasonKeyIDMismatch},
			{id(7), `{"n":7}`, signedHeader("", "k1", sig(k1, "k1", id(7), `{"n":7}`)), authenticity.ReasonAlgorithmMissing},
			{id(8), `{"n":8}`, signedHeader("hmac-sha256", "k1", sig(k1, "k1", id(8), `{"n":8}`)), ""},
		}...)
	}
	for _, m := range msgs {
		m.header.Set("Nats-Msg-Id", m.id)
		natstest.Publish(t, e.js, "orders.created", []byte(m.body), m.header)
	}

	p := &authenticity.Policy{SignatureHeader: authenticity.DefaultSignatureHeader, AlgorithmHeader: authenticity.DefaultAlgorithmHeader,
		KeyIDHeader: authenticity.DefaultKeyIDHeader, Rules: []authenticity.Rule{{Subject: "orders.>", Algorithm: authenticity.HMACSHA256,
			Keys: []authenticity.Key{{ID: "k1", Material: k1}}, SignedFields: authenticity.DefaultSignedFields}}}
	cs := &custody.Settings{Algorithm: "sha256", HashPayload: true, HashMetadata: true, MaxHashInputBytes: 1 << 20}
	rs := &recordSink{}
	m := newMetrics(t)
	start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: rs, Metrics: m, DeadLetter: dlqOptions(), Isolation: iso,
		Authenticate: func(env *sink.Envelope) (error, error) {
			v := p.Check(env)
			if v.Accepted {
				return nil, nil
			}
			return v.Error(env.Subject), nil
		},
		Custody: func(env *sink.Envelope) error {
			doc, err := cs.Compute(env)
			env.Custody = doc
			return err
		}})
	e.waitAcked(c, uint64(len(msgs)))

	var wantStored []string
	wantDead := map[string]string{}
	for i, mm := range msgs {
		stem := fmt.Sprintf("ORDERS-%020d", i+1)
		raw := rs.get(stem)
		if mm.reason != "" {
			wantDead[stem] = mm.reason
			if raw != nil {
				t.Errorf("%s (%s) was stored", mm.id, mm.reason)
			}
			continue
		}
		wantStored = append(wantStored, stem)
		if raw == nil {
			t.Errorf("%s not stored", mm.id)
			continue
		}
		v := custody.VerifyFileRecord(raw)
		if !v.HasCustody || v.Err != nil || len(v.Mismatches) > 0 {
			t.Errorf("%s custody verification = %+v", mm.id, v)
		}
	}
	dead := e.dlqMessages()
	got := map[string]string{}
	for _, d := range dead {
		var body struct {
			Seq       int    `json:"stream_sequence"`
			ErrorType string `json:"error_type"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(d.Data, &body); err != nil {
			t.Fatal(err)
		}
		if body.ErrorType != sink.PolicyViolationError || d.Header.Get("Nats-Sinks-Error-Type") != sink.PolicyViolationError {
			t.Errorf("DLQ seq %d error_type = %q (header %q)", body.Seq, body.ErrorType, d.Header.Get("Nats-Sinks-Error-Type"))
		}
		stem := fmt.Sprintf("ORDERS-%020d", body.Seq)
		want := "message authenticity verification rejected 1 message(s); first subject='orders.created' rule='orders.>' reason=" + wantDead[stem]
		if body.Error != want {
			t.Errorf("DLQ %s error = %q, want %q", stem, body.Error, want)
		}
		got[stem] = body.Error
	}
	if len(got) != len(wantDead) {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("DLQ holds %v, want %d records", keys, len(wantDead))
	}
	for _, tt := range []struct {
		name      string
		got, want uint64
	}{
		{"passed", m.AuthenticityPassed.Value(), uint64(len(wantStored))},
		{"rejected", m.AuthenticityRejected.Value(), uint64(len(wantDead))},
		{"acked", m.MessagesAcked.Value(), uint64(len(msgs))},
		{"dlq", m.MessagesDLQ.Value(), uint64(len(wantDead))},
		{"failed", m.MessagesFailed.Value(), uint64(len(wantDead))},
		{"sink write errors", m.SinkWriteErrors.Value(), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	// Every batch here holds accepted and rejected messages when all came
	// in one fetch; otherwise each counter is at least 1 and at most the
	// number of batches.
	batches := m.BatchesFetched.Value()
	for _, c := range []struct {
		name string
		got  uint64
	}{{"batches passed", m.AuthenticityBatchesPassed.Value()}, {"batches rejected", m.AuthenticityBatchesReject.Value()}} {
		if batches == 1 && c.got != 1 || c.got < 1 || c.got > batches {
			t.Errorf("%s = %d with %d batches fetched", c.name, c.got, batches)
		}
	}
}

// TestCustodyFailureIsolation: a malformed chain link dead-letters only its
// message with isolation "message", the whole batch with "batch"; nothing
// of a dead-lettered message is stored.
func TestCustodyFailureIsolation(t *testing.T) {
	for _, tt := range []struct {
		iso        string
		stored     int
		deadErrors int
	}{{IsolationMessage, 2, 1}, {IsolationBatch, 0, 3}} {
		t.Run(tt.iso, func(t *testing.T) {
			e := newEnv(t, true)
			for i, prev := range []string{"", "not-a-digest", ""} {
				h := nats.Header{}
				if prev != "" {
					h.Set(custody.DefaultPreviousHashHeader, prev)
				}
				natstest.Publish(t, e.js, "orders.created", fmt.Appendf(nil, `{"n":%d}`, i), h)
			}
			// The three must arrive as one batch. A consumer created after
			// the publishes counts them as pending at creation, so the
			// runner's first (no-wait) fetch takes all three at once. Created
			// before them, the server may count them in only after that fetch
			// found nothing, and the lingering fetch that follows holds its
			// partial batch until BatchTimeout: with a timeout as long as the
			// ACK wait below, the ACKs came too late under load.
			c := e.consumer(ConsumerSpec{})
			cs := &custody.Settings{Algorithm: "sha256", HashPayload: true, HashMetadata: true, IncludePreviousHash: true,
				PreviousHashHeader: custody.DefaultPreviousHashHeader, MaxHashInputBytes: 1 << 20}
			rs := &recordSink{}
			start(t, &Runner{Consumer: c, JetStream: e.js, Conn: e.nc, Sink: rs, Metrics: newMetrics(t), DeadLetter: dlqOptions(),
				Isolation: tt.iso, BatchSize: 10, BatchTimeout: 5 * time.Second,
				Custody: func(env *sink.Envelope) error {
					doc, err := cs.Compute(env)
					env.Custody = doc
					return err
				}})
			e.waitAcked(c, 3)
			stored := 0
			for i := 1; i <= 3; i++ {
				if rs.get(fmt.Sprintf("ORDERS-%020d", i)) != nil {
					stored++
				}
			}
			if rs.get(fmt.Sprintf("ORDERS-%020d", 2)) != nil || stored != tt.stored {
				t.Errorf("stored %d records (seq 2 stored: %v), want %d", stored, rs.get(fmt.Sprintf("ORDERS-%020d", 2)) != nil, tt.stored)
			}
			dead := e.dlqMessages()
			if len(dead) != tt.deadErrors {
				t.Fatalf("DLQ holds %d, want %d", len(dead), tt.deadErrors)
			}
			for _, d := range dead {
				var body struct {
					ErrorType string `json:"error_type"`
					Error     string `json:"error"`
				}
				_ = json.Unmarshal(d.Data, &body)
				if body.ErrorType != sink.ValidationError || body.Error != custody.ErrPreviousHash.Error() {
					t.Errorf("DLQ body = %+v", body)
				}
			}
		})
	}
}
