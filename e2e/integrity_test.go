package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// signHMAC is an independent producer: the documented signed document
// built with encoding/json (which sorts map keys) and crypto/hmac.
func signHMAC(key []byte, keyID, subject, msgID string, body []byte) string {
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"schema": "nats_sinks.message_authenticity.v1", "version": 1, "algorithm": "hmac-sha256",
		"key_id": keyID, "payload_sha256": hex.EncodeToString(sum[:]),
		"metadata": map[string]any{"subject": subject, "message_id": msgID}})
	m := hmac.New(sha256.New, key)
	m.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestIntegrityCrashRecovery runs the real binary with message
// authenticity and custody on, SIGKILLs it at random moments, restarts it,
// and checks the end state: every accepted message stored once with a
// custody document that verifies from the file alone, every rejected one
// dead-lettered with its reason and never stored, `verify-custody` clean.
func TestIntegrityCrashRecovery(t *testing.T) {
	const n = 3000
	key := bytes.Repeat([]byte{0x5c}, 32)
	t.Setenv("E2E_AUTH_KEY", base64.StdEncoding.EncodeToString(key))

	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "AUDIT_DLQ", Subjects: []string{"dlq.audit"}})
	ctx := context.Background()
	rejected := map[uint64]string{}
	for i := range n {
		id := fmt.Sprintf("A-%d", i+1)
		b := body(i)
		h := nats.Header{"Nats-Msg-Id": {id}, "Nats-Sinks-Authenticity-Algorithm": {"hmac-sha256"}, "Nats-Sinks-Authenticity-Key-Id": {"audit-1"}}
		sig := signHMAC(key, "audit-1", "audit.events", id, b)
		switch i % 10 {
		case 3: // tampered payload
			b = append(b[:len(b)-2:len(b)-2], []byte(`y"}`)...)
			rejected[uint64(i+1)] = "signature_invalid"
		case 7: // unsigned
			sig = ""
			rejected[uint64(i+1)] = "signature_header_missing"
		}
		if sig != "" {
			h.Set("Nats-Sinks-Authenticity-Signature", sig)
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "audit.events", Data: b, Header: h}); err != nil {
			t.Fatal(err)
		}
	}

	out := t.TempDir()
	cfg := fileConfig(t, s.ClientURL(), "AUDIT", "audit-file", "audit.>", out, `,
  "dead_letter": {"enabled": true, "subject": "dlq.audit"},
  "message_authenticity": {"enabled": true, "rules": [{"subject": "audit.>", "key_id": "audit-1", "key_b64_env": "E2E_AUTH_KEY"}]},
  "custody": {"enabled": true, "key_id": "audit-custody-1"}`)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)
	for round := range 3 {
		p := start(t, cfg)
		time.Sleep(time.Duration(200+rng.IntN(1200)) * time.Millisecond)
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "AUDIT", "audit-file")
		t.Logf("round %d: killed; ack floor %d, ack pending %d (%v)", round, floor, pending, err)
	}
	p := start(t, cfg)
	natstest.WaitFor(t, 3*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "AUDIT", "audit-file")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	waitFetching(t, js, "AUDIT", "audit-file")
	p.stop(t)

	// Stored: every accepted message once, none of the rejected ones.
	stored := 0
	for seq := uint64(1); seq <= n; seq++ {
		path := filepath.Join(out, "audit.events", fmt.Sprintf("AUDIT-%020d.json", seq))
		data, err := os.ReadFile(path)
		if _, bad := rejected[seq]; bad {
			if err == nil {
				t.Errorf("rejected message %d was stored", seq)
			}
			continue
		}
		if err != nil {
			t.Errorf("accepted message %d not stored: %v", seq, err)
			continue
		}
		stored++
		v := custody.VerifyFileRecord(data)
		if !v.HasCustody || v.Err != nil || len(v.Mismatches) > 0 {
			t.Errorf("message %d: custody %+v", seq, v)
		}
	}
	if want := n - len(rejected); stored != want {
		t.Errorf("stored %d records, want %d", stored, want)
	}

	// Dead-lettered: each rejected message once (the DLQ's Nats-Msg-Id
	// drops the copy a kill between PubAck and ACK republishes), each with
	// its own reason.
	st, err := js.Stream(ctx, "AUDIT_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var dl struct {
			Seq       uint64 `json:"stream_sequence"`
			ErrorType string `json:"error_type"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			t.Fatal(err)
		}
		want := "message authenticity verification rejected 1 message(s); first subject='audit.events' rule='audit.>' reason=" + rejected[dl.Seq]
		if dl.ErrorType != "PolicyViolationError" || dl.Error != want {
			t.Errorf("dead letter of %d: %s %q, want PolicyViolationError %q", dl.Seq, dl.ErrorType, dl.Error, want)
		}
		if seen[dl.Seq] {
			t.Errorf("message %d dead-lettered twice", dl.Seq)
		}
		seen[dl.Seq] = true
	}
	if len(seen) != len(rejected) {
		t.Errorf("%d messages dead-lettered, want %d", len(seen), len(rejected))
	}

	// And the command an auditor runs.
	cmd := exec.Command(binary, "verify-custody", cfg)
	got, err := cmd.CombinedOutput()
	want := fmt.Sprintf("Custody verified: records=%d with_custody=%d chained=0 failed=0", stored, stored)
	if err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("verify-custody: %v\n%s\nwant %s", err, got, want)
	}
}
