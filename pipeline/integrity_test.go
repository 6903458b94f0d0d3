package pipeline_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// signedDoc is the signed document of docs/integrity.md#what-producers-sign
// built by an independent producer: encoding/json (sorted map keys, no
// HTML escaping, trailing newline removed), not the sink's encoder.
func signedDoc(alg, keyID string, body []byte, meta map[string]any) []byte {
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"schema": "nats_sinks.message_authenticity.v1", "version": 1, "algorithm": alg,
		"key_id": keyID, "payload_sha256": hex.EncodeToString(sum[:]), "metadata": meta})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func hmacSig(key []byte, doc []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(doc)
	return m.Sum(nil)
}

// integrityRun is one pipeline started from a configuration document with
// a file sink under dir and the DLQ subject dlq.
type integrityRun struct {
	t   *testing.T
	js  jetstream.JetStream
	url string
	dir string
	// consumer holds extra consumer_management members (", …").
	consumer string
}

func newIntegrityRun(t *testing.T) *integrityRun {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "INTEG", Subjects: []string{"orders.>", "sensor.>", "x.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "INTEG_DLQ", Subjects: []string{"dlq"}})
	return &integrityRun{t: t, js: js, url: s.ClientURL(), dir: t.TempDir()}
}

// run starts a pipeline with the sections extra (and a DLQ when dlq),
// calls during (when set) once it runs, waits until until accepts the
// consumer's state, and closes it.
func (r *integrityRun) run(extra string, dlq bool, env func(string) (string, bool), during func(), until func(*jetstream.ConsumerInfo) error) {
	t := r.t
	t.Helper()
	dl := ""
	if dlq {
		dl = `"dead_letter": {"enabled": true, "subject": "dlq"},`
	}
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "INTEG", "consumer": "integ", "subject": "*.>"},
  "consumer_management": {"ack_wait_seconds": 30%s},
  "delivery": {"batch_size": 100, "batch_timeout_ms": 100},
  "logging": {"level": "ERROR"}, %s %s,
  "sink": {"type": "file", "directory": %q}
}`, r.url, r.consumer, dl, extra, r.dir)
	cfg, err := config.Parse([]byte(doc), "integrity.json", builtin.Registry(), env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := pipeline.Start(ctx, cfg, pipeline.Options{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if during != nil {
		during()
	}
	natstest.WaitFor(t, 30*time.Second, func() error {
		c, err := r.js.Consumer(ctx, "INTEG", "integ")
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		return until(info)
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	p.Close(5 * time.Second)
}

// acked waits for the ack floor n with nothing pending.
func acked(n uint64) func(*jetstream.ConsumerInfo) error {
	return func(info *jetstream.ConsumerInfo) error {
		if info.AckFloor.Stream != n || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor %d, pending %d; want %d, 0", info.AckFloor.Stream, info.NumAckPending, n)
		}
		return nil
	}
}

// stored reports whether the file sink stored stream sequence seq of subj.
func (r *integrityRun) stored(subj string, seq uint64) bool {
	_, err := os.Stat(filepath.Join(r.dir, subj, fmt.Sprintf("INTEG-%020d.json", seq)))
	return err == nil
}

// deadLetters returns the DLQ records by the stream sequence they carry:
// error_type and error text.
func (r *integrityRun) deadLetters() map[uint64][2]string {
	t := r.t
	t.Helper()
	ctx := context.Background()
	st, err := r.js.Stream(ctx, "INTEG_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][2]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Seq       uint64 `json:"stream_sequence"`
			ErrorType string `json:"error_type"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Fatal(err)
		}
		out[body.Seq] = [2]string{body.ErrorType, body.Error}
	}
	return out
}

// TestIntegrityConformance runs configurations through the whole pipeline
// (file sink, DLQ) with messages signed by an independent producer, and
// checks each verdict from the outside: what was stored, what was
// dead-lettered with which error type and text, what was acknowledged.
// It covers the reasons of docs/integrity.md#rejections that the runner
// tests do not reach through a configuration (algorithm mismatch, missing
// key id, uncovered subject), a tampered signed priority and an accepted
// tampered unsigned header, an HMAC signature differing in its last byte,
// Ed25519 signatures of 63 and 65 bytes, the disabled-rule exemption, and
// key rotation with additional_keys: both ids pass during the overlap, the
// old one fails as key_id_mismatch after its removal, and a changed key in
// the environment takes effect only at the next start.
func TestIntegrityConformance(t *testing.T) {
	r := newIntegrityRun(t)
	k1, k2, k3 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	pub := base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	b64 := base64.StdEncoding.EncodeToString

	var mu sync.Mutex
	envVars := map[string]string{"K2": b64(k2)}
	env := func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := envVars[name]
		return v, ok
	}
	rules := func(additional string) string {
		return fmt.Sprintf(`"message_authenticity": {"enabled": true, "rules": [
    {"subject": "orders.public.>", "enabled": false},
    {"subject": "orders.>", "key_id": "k2", "key_b64_env": "K2", "signed_fields": ["subject", "message_id", "priority"], "additional_keys": [%s]},
    {"subject": "sensor.>", "algorithm": "ed25519", "key_id": "ed-1", "key_b64": %q}]}`, additional, pub)
	}
	overlap := rules(fmt.Sprintf(`{"key_id": "k1", "key_b64": %q}`, b64(k1)))

	type msg struct {
		subject, id, body string
		header            nats.Header
		reason            string // "" = stored
	}
	orders := func(key []byte, keyID, subj, id, body, priority string) nats.Header {
		meta := map[string]any{"subject": subj, "message_id": id, "priority": nil}
		if priority != "" {
			meta["priority"] = priority
		}
		h := nats.Header{"Nats-Msg-Id": {id}, "Nats-Sinks-Authenticity-Algorithm": {"hmac-sha256"},
			"Nats-Sinks-Authenticity-Key-Id":    {keyID},
			"Nats-Sinks-Authenticity-Signature": {b64(hmacSig(key, signedDoc("hmac-sha256", keyID, []byte(body), meta)))}}
		if priority != "" {
			h.Set("Nats-Sinks-Priority", priority)
		}
		return h
	}
	sensor := func(id, body string, sigLen int) nats.Header {
		sig := ed25519.Sign(priv, signedDoc("ed25519", "ed-1", []byte(body), map[string]any{"subject": "sensor.t1", "message_id": id}))
		switch {
		case sigLen < len(sig):
			sig = sig[:sigLen]
		case sigLen > len(sig):
			sig = append(sig, 0)
		}
		return nats.Header{"Nats-Msg-Id": {id}, "Nats-Sinks-Authenticity-Algorithm": {"ED25519"},
			"Nats-Sinks-Authenticity-Key-Id": {"ed-1"}, "Nats-Sinks-Authenticity-Signature": {b64(sig)}}
	}
	with := func(h nats.Header, kv ...string) nats.Header {
		c := nats.Header{}
		for k, v := range h {
			c[k] = append([]string(nil), v...)
		}
		h = c
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	lastByte := func(h nats.Header) nats.Header {
		sig, _ := base64.StdEncoding.DecodeString(h.Get("Nats-Sinks-Authenticity-Signature"))
		sig[len(sig)-1] ^= 1
		return with(h, "Nats-Sinks-Authenticity-Signature", b64(sig))
	}
	const policy = "PolicyViolationError"
	msgs := []msg{
		{"orders.created", "P-1", `{"n":1}`, orders(k2, "k2", "orders.created", "P-1", `{"n":1}`, "high"), ""},
		{"orders.created", "P-2", `{"n":2}`, orders(k1, "k1", "orders.created", "P-2", `{"n":2}`, ""), ""}, // overlap key
		{"orders.created", "P-3", `{"n":3}`, with(orders(k2, "k2", "orders.created", "P-3", `{"n":3}`, ""), "Nats-Sinks-Authenticity-Algorithm", "ed25519"), "algorithm_mismatch"},
		{"orders.created", "P-4", `{"n":4}`, with(orders(k2, "k2", "orders.created", "P-4", `{"n":4}`, ""), "Nats-Sinks-Authenticity-Key-Id", ""), "key_id_header_missing"},
		{"x.other", "P-5", `{"n":5}`, orders(k2, "k2", "x.other", "P-5", `{"n":5}`, ""), "subject_not_covered_by_authenticity_policy"},
		{"orders.public.news", "P-6", `{"n":6}`, nats.Header{"Nats-Msg-Id": {"P-6"}}, ""}, // exempt
		{"orders.created", "P-7", `{"n":7}`, with(orders(k2, "k2", "orders.created", "P-7", `{"n":7}`, "high"), "Nats-Sinks-Priority", "low"), "signature_invalid"},
		{"orders.created", "P-8", `{"n":8}`, with(orders(k2, "k2", "orders.created", "P-8", `{"n":8}`, ""), "X-Unsigned", "changed"), ""},
		{"orders.created", "P-9", `{"n":9}`, lastByte(orders(k2, "k2", "orders.created", "P-9", `{"n":9}`, "")), "signature_invalid"},
		{"sensor.t1", "P-10", `{"t":10}`, sensor("P-10", `{"t":10}`, 64), ""},
		{"sensor.t1", "P-11", `{"t":11}`, sensor("P-11", `{"t":11}`, 63), "signature_invalid"},
		{"sensor.t1", "P-12", `{"t":12}`, sensor("P-12", `{"t":12}`, 65), "signature_invalid"},
	}
	for _, m := range msgs {
		natstest.Publish(t, r.js, m.subject, []byte(m.body), m.header)
	}
	r.run(overlap, true, env, nil, acked(uint64(len(msgs))))

	check := func(msgs []msg, first uint64) {
		t.Helper()
		dead := r.deadLetters()
		for i, m := range msgs {
			seq := first + uint64(i)
			if got := r.stored(m.subject, seq); got != (m.reason == "") {
				t.Errorf("%s (seq %d, want reason %q): stored = %v", m.id, seq, m.reason, got)
			}
			d, ok := dead[seq]
			if m.reason == "" {
				if ok {
					t.Errorf("%s (seq %d) dead-lettered: %v", m.id, seq, d)
				}
				continue
			}
			rule := map[string]string{"orders.created": "orders.>", "sensor.t1": "sensor.>", "x.other": "<unmatched>"}[m.subject]
			want := [2]string{policy, fmt.Sprintf("message authenticity verification rejected 1 message(s); first subject='%s' rule='%s' reason=%s", m.subject, rule, m.reason)}
			if d != want {
				t.Errorf("%s (seq %d) dead letter = %q, want %q", m.id, seq, d, want)
			}
		}
	}
	check(msgs, 1)

	// Overlap over: k1 removed, so its signatures fail as key_id_mismatch.
	// K2 changes to k3 in the environment while this pipeline runs: it
	// read K2 at start, so a k3 signature fails until the next start.
	after := []msg{
		{"orders.created", "R-1", `{"r":1}`, orders(k1, "k1", "orders.created", "R-1", `{"r":1}`, ""), "key_id_mismatch"},
		{"orders.created", "R-2", `{"r":2}`, orders(k2, "k2", "orders.created", "R-2", `{"r":2}`, ""), ""},
		{"orders.created", "R-3", `{"r":3}`, orders(k3, "k2", "orders.created", "R-3", `{"r":3}`, ""), "signature_invalid"},
	}
	first := uint64(len(msgs)) + 1
	for _, m := range after[:2] {
		natstest.Publish(t, r.js, m.subject, []byte(m.body), m.header)
	}
	r.run(rules(""), true, env, func() {
		mu.Lock()
		envVars["K2"] = b64(k3)
		mu.Unlock()
		natstest.Publish(t, r.js, after[2].subject, []byte(after[2].body), after[2].header)
	}, acked(first+2))
	check(after, first)

	// Restarted, the pipeline reads k3.
	r4 := msg{"orders.created", "R-4", `{"r":4}`, orders(k3, "k2", "orders.created", "R-4", `{"r":4}`, ""), ""}
	natstest.Publish(t, r.js, r4.subject, []byte(r4.body), r4.header)
	r.run(rules(""), true, env, nil, acked(first+3))
	check([]msg{r4}, first+3)
}

// TestAuthenticityRejectionPaths: a rejected message of an encrypted
// subject is dead-lettered with the encryption envelope as its payload,
// never the plaintext; with the DLQ disabled a rejected message is
// neither stored nor acknowledged, negatively acknowledged or terminated
// (it stays pending until AckWait) while the accepted one next to it is
// stored and acknowledged.
func TestAuthenticityRejectionPaths(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	b64 := base64.StdEncoding.EncodeToString
	auth := fmt.Sprintf(`"message_authenticity": {"enabled": true, "rules": [{"subject": "orders.>", "key_id": "k", "key_b64": %q}]}`, b64(key))
	signed := func(id, body string) nats.Header {
		doc := signedDoc("hmac-sha256", "k", []byte(body), map[string]any{"subject": "orders.created", "message_id": id})
		return nats.Header{"Nats-Msg-Id": {id}, "Nats-Sinks-Authenticity-Algorithm": {"hmac-sha256"},
			"Nats-Sinks-Authenticity-Key-Id": {"k"}, "Nats-Sinks-Authenticity-Signature": {b64(hmacSig(key, doc))}}
	}
	noEnv := func(string) (string, bool) { return "", false }

	t.Run("encrypted subject", func(t *testing.T) {
		r := newIntegrityRun(t)
		const secret = `{"approved":true}`
		natstest.Publish(t, r.js, "orders.created", []byte(secret), nats.Header{"Nats-Msg-Id": {"E-1"}}) // unsigned
		enc := fmt.Sprintf(`"encryption": {"enabled": true, "key_id": "enc-1", "key_b64": %q, "envelope_version": 2}, `, b64(bytes.Repeat([]byte{4}, 32)))
		r.run(enc+auth, true, noEnv, nil, acked(1))
		if r.stored("orders.created", 1) {
			t.Error("rejected message stored")
		}
		st, err := r.js.Stream(context.Background(), "INTEG_DLQ")
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			ErrorType     string `json:"error_type"`
			PayloadBase64 string `json:"payload_base64"`
		}
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Fatal(err)
		}
		payload, err := base64.StdEncoding.DecodeString(body.PayloadBase64)
		if err != nil {
			t.Fatal(err)
		}
		var envelope struct {
			E struct {
				Schema string `json:"schema"`
				KeyID  string `json:"key_id"`
			} `json:"_nats_sinks_encryption"`
		}
		if err := json.Unmarshal(payload, &envelope); err != nil || envelope.E.Schema != "nats_sinks.encrypted_payload.v2" || envelope.E.KeyID != "enc-1" {
			t.Errorf("DLQ payload = %s (%v), want an encryption envelope of key enc-1", payload, err)
		}
		if bytes.Contains(m.Data, []byte(secret)) || bytes.Contains(payload, []byte(secret)) {
			t.Error("the dead letter carries the plaintext")
		}
		if body.ErrorType != "PolicyViolationError" {
			t.Errorf("error_type = %q", body.ErrorType)
		}
	})

	t.Run("dlq disabled", func(t *testing.T) {
		r := newIntegrityRun(t)
		natstest.Publish(t, r.js, "orders.created", []byte(`{"n":1}`), nats.Header{"Nats-Msg-Id": {"U-1"}}) // unsigned
		natstest.Publish(t, r.js, "orders.created", []byte(`{"n":2}`), signed("U-2", `{"n":2}`))
		r.run(auth, false, noEnv, nil, func(info *jetstream.ConsumerInfo) error {
			// Seq 2 acknowledged (the batch was decided), seq 1 held.
			if !r.stored("orders.created", 2) || info.NumAckPending != 1 || info.AckFloor.Stream != 0 {
				return fmt.Errorf("stored(2) = %v, ack pending %d, ack floor %d", r.stored("orders.created", 2), info.NumAckPending, info.AckFloor.Stream)
			}
			return nil
		})
		if r.stored("orders.created", 1) {
			t.Error("rejected message stored")
		}
		c, err := r.js.Consumer(context.Background(), "INTEG", "integ")
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// A NAK would have made it redeliverable (no longer ack-pending),
		// a TERM or ACK would have moved the ack floor.
		if info.NumAckPending != 1 || info.AckFloor.Stream != 0 || info.NumRedelivered != 0 {
			t.Errorf("after the run: ack pending %d, ack floor %d, redelivered %d; want 1, 0, 0", info.NumAckPending, info.AckFloor.Stream, info.NumRedelivered)
		}
	})
}

// TestAuthenticityDLQPublishFailure: while the DLQ stream is gone, a
// rejected message is neither stored nor acknowledged: it takes the
// temporary path, is redelivered and rejected again; once the stream is
// back it is dead-lettered with its reason and acknowledged.
func TestAuthenticityDLQPublishFailure(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	auth := fmt.Sprintf(`"message_authenticity": {"enabled": true, "rules": [{"subject": "orders.>", "key_id": "k", "key_b64": %q}]}`,
		base64.StdEncoding.EncodeToString(key))
	r := newIntegrityRun(t)
	ctx := context.Background()
	dlqConfig := jetstream.StreamConfig{Name: "INTEG_DLQ", Subjects: []string{"dlq"}}
	r.run(auth, true, func(string) (string, bool) { return "", false }, func() {
		if err := r.js.DeleteStream(ctx, "INTEG_DLQ"); err != nil {
			t.Error(err)
		}
		natstest.Publish(t, r.js, "orders.created", []byte(`{"n":1}`), nats.Header{"Nats-Msg-Id": {"D-1"}}) // unsigned
		natstest.WaitFor(t, 30*time.Second, func() error {
			c, err := r.js.Consumer(ctx, "INTEG", "integ")
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumRedelivered == 0 || info.AckFloor.Stream != 0 {
				return fmt.Errorf("redelivered %d, ack floor %d; want a redelivery, nothing acknowledged", info.NumRedelivered, info.AckFloor.Stream)
			}
			return nil
		})
		if r.stored("orders.created", 1) {
			t.Error("rejected message stored while its dead letter failed")
		}
		natstest.CreateStream(t, r.js, dlqConfig)
	}, acked(1))
	if r.stored("orders.created", 1) {
		t.Error("rejected message stored")
	}
	want := [2]string{"PolicyViolationError", "message authenticity verification rejected 1 message(s); first subject='orders.created' rule='orders.>' reason=algorithm_header_missing"}
	if got := r.deadLetters(); len(got) != 1 || got[1] != want {
		t.Errorf("dead letters = %v, want seq 1: %q", got, want)
	}
}

// TestCustodyChainIndependentVerifier publishes a chain of messages, each
// naming the previous stored record's record_hash in
// Nats-Sinks-Previous-Custody-Hash, through the pipeline into a file sink,
// then verifies the stored records with testdata/verify_custody.py, a
// verifier that shares nothing with the product (Python's json module
// and hashlib, following docs/integrity.md#verifying-stored-records): all
// three hashes of every record recompute and every link resolves. A byte
// of one stored payload, then of another record's metadata, changed on
// disk breaks exactly that record, for both the script and the product's
// own verifier.
func TestCustodyChainIndependentVerifier(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("NATS_SINKS_REQUIRE_SERVICES") != "" {
			t.Fatalf("python3 is required for the independent verifier: %v", err)
		}
		t.Skipf("needs python3 for the independent verifier: %v", err)
	}
	const n = 4
	r := newIntegrityRun(t)
	ctx := context.Background()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(r.dir, "orders.created", fmt.Sprintf("INTEG-%020d.json", i+1))
	}
	custodyCfg := `"custody": {"enabled": true, "key_id": "chain-policy-1", "include_previous_hash": true}`
	r.run(custodyCfg, true, func(string) (string, bool) { return "", false }, func() {
		prev := ""
		for i := range n {
			h := nats.Header{"Nats-Msg-Id": {fmt.Sprintf("C-%d", i+1)}}
			if prev != "" {
				h.Set("Nats-Sinks-Previous-Custody-Hash", strings.ToUpper(prev)) // stored lower-cased
			}
			natstest.Publish(t, r.js, "orders.created", fmt.Appendf(nil, `{"n":%d,"note":"café %d","ratio":0.%d5}`, i+1, i+1, i), h)
			natstest.WaitFor(t, 30*time.Second, func() error {
				data, err := os.ReadFile(paths[i])
				if err != nil {
					return err
				}
				var rec struct {
					Custody struct {
						RecordHash string `json:"record_hash"`
						Previous   string `json:"previous_record_hash"`
					} `json:"custody"`
				}
				if err := json.Unmarshal(data, &rec); err != nil {
					return err
				}
				if rec.Custody.Previous != prev {
					t.Errorf("record %d previous_record_hash = %q, want %q", i+1, rec.Custody.Previous, prev)
				}
				prev = rec.Custody.RecordHash
				return nil
			})
		}
	}, acked(n))

	verify := func() string {
		t.Helper()
		out, err := exec.CommandContext(ctx, python, append([]string{"testdata/verify_custody.py"}, paths...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("verify_custody.py: %v\n%s", err, out)
		}
		return strings.ReplaceAll(string(out), r.dir+string(filepath.Separator), "")
	}
	want := func(bad map[int]string) string {
		var b strings.Builder
		for i := range n {
			status := "ok"
			if f, ok := bad[i+1]; ok {
				status = "mismatch " + f
			}
			fmt.Fprintf(&b, "orders.created/INTEG-%020d.json %s\n", i+1, status)
		}
		fmt.Fprintf(&b, "links %d\n", n-1)
		return b.String()
	}
	productSays := func(bad map[int]string) {
		t.Helper()
		for i, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			v := custody.VerifyFileRecord(data)
			if got := strings.Join(v.Mismatches, ","); got != bad[i+1] || v.Err != nil {
				t.Errorf("VerifyFileRecord(record %d) mismatches = %q (%v), want %q", i+1, got, v.Err, bad[i+1])
			}
		}
	}
	if got := verify(); got != want(nil) {
		t.Errorf("independent verifier:\n%s\nwant\n%s", got, want(nil))
	}
	productSays(nil)

	edit := func(i int, old, new string) {
		t.Helper()
		data, err := os.ReadFile(paths[i-1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(old)) {
			t.Fatalf("record %d has no %s", i, old)
		}
		if err := os.WriteFile(paths[i-1], bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(2, `"n":2`, `"n":3`) // payload
	bad := map[int]string{2: "payload_hash"}
	if got := verify(); got != want(bad) {
		t.Errorf("after a payload edit, independent verifier:\n%s\nwant\n%s", got, want(bad))
	}
	productSays(bad)
	edit(3, `"redelivered":false`, `"redelivered":true`) // metadata
	bad[3] = "metadata_hash"
	if got := verify(); got != want(bad) {
		t.Errorf("after a metadata edit, independent verifier:\n%s\nwant\n%s", got, want(bad))
	}
	productSays(bad)
}

// TestAuthenticityHeadersOnly: on a headers-only consumer a signed
// message whose body was left out is rejected as payload_omitted (its
// signature covers a body the sink never saw), dead-lettered without a
// payload, and not stored.
func TestAuthenticityHeadersOnly(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	b64 := base64.StdEncoding.EncodeToString
	r := newIntegrityRun(t)
	r.consumer = `, "headers_only": true`
	body := `{"n":1}`
	doc := signedDoc("hmac-sha256", "k", []byte(body), map[string]any{"subject": "orders.created", "message_id": "H-1"})
	natstest.Publish(t, r.js, "orders.created", []byte(body), nats.Header{"Nats-Msg-Id": {"H-1"},
		"Nats-Sinks-Authenticity-Algorithm": {"hmac-sha256"}, "Nats-Sinks-Authenticity-Key-Id": {"k"},
		"Nats-Sinks-Authenticity-Signature": {b64(hmacSig(key, doc))}})
	auth := fmt.Sprintf(`"message_authenticity": {"enabled": true, "rules": [{"subject": "orders.>", "key_id": "k", "key_b64": %q}]}`, b64(key))
	r.run(auth, true, func(string) (string, bool) { return "", false }, nil, acked(1))
	if r.stored("orders.created", 1) {
		t.Error("rejected message stored")
	}
	want := [2]string{"PolicyViolationError", "message authenticity verification rejected 1 message(s); first subject='orders.created' rule='orders.>' reason=payload_omitted"}
	if got := r.deadLetters(); len(got) != 1 || got[1] != want {
		t.Errorf("dead letters = %v, want seq 1: %q", got, want)
	}
	st, err := r.js.Stream(context.Background(), "INTEG_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var dl map[string]any
	if err := json.Unmarshal(m.Data, &dl); err != nil {
		t.Fatal(err)
	}
	if _, has := dl["payload_base64"]; has || dl["payload_unavailable_reason"] != "headers_only" {
		t.Errorf("dead letter payload_base64 present = %v, payload_unavailable_reason = %v; want absent, headers_only", has, dl["payload_unavailable_reason"])
	}
}

// TestCustodyInputLimit: a payload whose canonical input exceeds
// custody.max_hash_input_bytes is dead-lettered as a ValidationError with
// the documented text, and only that message: the small one of the same
// batch is stored with its custody document.
func TestCustodyInputLimit(t *testing.T) {
	r := newIntegrityRun(t)
	big := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", 2000))
	natstest.Publish(t, r.js, "orders.created", []byte(big), nats.Header{"Nats-Msg-Id": {"L-1"}})
	natstest.Publish(t, r.js, "orders.created", []byte(`{"n":2}`), nats.Header{"Nats-Msg-Id": {"L-2"}})
	r.run(`"custody": {"enabled": true, "hash_metadata": false, "max_hash_input_bytes": 1024}`, true,
		func(string) (string, bool) { return "", false }, nil, acked(2))
	if r.stored("orders.created", 1) || !r.stored("orders.created", 2) {
		t.Errorf("stored(1) = %v, stored(2) = %v; want false, true", r.stored("orders.created", 1), r.stored("orders.created", 2))
	}
	want := [2]string{"ValidationError", "custody payload hash input exceeds custody max_hash_input_bytes"}
	if got := r.deadLetters(); len(got) != 1 || got[1] != want {
		t.Errorf("dead letters = %v, want seq 1: %q", got, want)
	}
	data, err := os.ReadFile(filepath.Join(r.dir, "orders.created", fmt.Sprintf("INTEG-%020d.json", 2)))
	if err != nil {
		t.Fatal(err)
	}
	if v := custody.VerifyFileRecord(data); !v.HasCustody || v.Err != nil || len(v.Mismatches) > 0 {
		t.Errorf("stored record's custody = %+v", v)
	}
}
