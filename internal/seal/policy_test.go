package seal

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/sink"
)

func otherKey() []byte { return bytes.Repeat([]byte{0x5a}, 32) }

func message(subject, data string) *sink.Envelope {
	return &sink.Envelope{
		Subject: subject, Data: []byte(data), Headers: sink.Headers{"Nats-Msg-Id": "m1"},
		Stream: "S", StreamSequence: 7, Labels: []string{"a"},
		Payload: sink.PayloadPresence{Present: true, OriginalSize: int64(len(data))},
	}
}

// sealed describes what Policy.Seal did to one message: empty when it
// left the payload alone, else the envelope's parameters and which key
// opens it.
type sealed struct {
	Algorithm string
	KeyID     string
	NonceSize string
	TagLength string
	Key       string // "top" (bytes 0..31) or "other" (0x5a…)
}

func describe(t *testing.T, e *sink.Envelope, plaintext string) sealed {
	t.Helper()
	if string(e.Data) == plaintext {
		return sealed{}
	}
	f := parseEnvelope(t, e.Data)
	got := sealed{
		Algorithm: fmt.Sprint(f["algorithm"]), KeyID: fmt.Sprint(f["key_id"]),
		NonceSize: fmt.Sprint(f["nonce_size_bytes"]), TagLength: fmt.Sprint(f["tag_length"]),
	}
	for name, key := range map[string][]byte{"top": testKey(), "other": otherKey()} {
		var k Key
		copy(k.Secret[:], key)
		if pt, err := Decrypt(e.Data, FixedKeyRing(k)); err == nil {
			if string(pt) != plaintext {
				t.Fatalf("decrypted %q, want %q", pt, plaintext)
			}
			got.Key = name
		}
	}
	if got.Key == "" {
		t.Fatalf("no test key decrypts %s", e.Data)
	}
	return got
}

func TestPolicySeal(t *testing.T) {
	top := gcm("top-key", 12)
	disabledTop := top
	disabledTop.Enabled = false
	noKeyTop := Settings{Algorithm: AES256GCM, KeyID: "default", NonceSize: 12, TagLength: 16}
	topGCM := sealed{AES256GCM, "top-key", "12", "16", "top"}

	for _, tt := range []struct {
		name  string
		top   Settings
		rules []Rule
		want  map[string]sealed // subject → outcome
	}{
		{"disabled without rules leaves everything", disabledTop, nil,
			map[string]sealed{"orders.new": {}, "x": {}}},
		{"enabled without rules encrypts every subject", top, nil,
			map[string]sealed{"orders.new": topGCM, "x": topGCM}},
		{"first matching rule wins", top, []Rule{
			{Subject: "orders.*", Settings: Settings{Enabled: true, KeyID: "narrow"}, Set: SetKeyID},
			{Subject: "orders.>", Settings: Settings{Enabled: true, KeyID: "wide"}, Set: SetKeyID},
			{Subject: "orders.new", Settings: Settings{Enabled: false}},
		}, map[string]sealed{
			"orders.new":    {AES256GCM, "narrow", "12", "16", "top"},
			"orders.eu.new": {AES256GCM, "wide", "12", "16", "top"},
			"billing.x":     topGCM,
		}},
		{"disabled rule exempts", top, []Rule{
			{Subject: "public.>", Settings: Settings{Enabled: false, KeyID: "ignored"}, Set: SetKeyID},
		}, map[string]sealed{"public.news": {}, "private.news": topGCM}},
		{"enabled rule under a disabled top level", disabledTop, []Rule{
			{Subject: "secure.>", Settings: Settings{Enabled: true}},
		}, map[string]sealed{"secure.report": topGCM, "plain.report": {}}},
		{"rule inherits every omitted field", top, []Rule{
			{Subject: "a.>", Settings: Settings{Enabled: true, Algorithm: "AES_256_CCM", TagLength: 8}, Set: SetAlgorithm | SetTagLength},
			{Subject: "b.>", Settings: Settings{Enabled: true, NonceSize: 8, KeyID: "b"}, Set: SetNonceSize | SetKeyID},
		}, map[string]sealed{
			"a.x": {AES256CCM, "top-key", "12", "8", "top"},
			"b.x": {AES256GCM, "b", "8", "16", "top"},
		}},
		{"fields a rule does not set are not taken from the rule", top, []Rule{
			{Subject: "a.>", Settings: Settings{Enabled: true, Algorithm: AES256CCM, KeyID: "ignored", NonceSize: 7, Key: otherKey()}},
		}, map[string]sealed{"a.x": topGCM}},
		{"rule with its own key uses only that key", top, []Rule{
			{Subject: "own.>", Settings: Settings{Enabled: true, KeyID: "own", Key: otherKey()}, Set: SetKeyID | SetKey},
		}, map[string]sealed{
			"own.x":   {AES256GCM, "own", "12", "16", "other"},
			"other.x": topGCM,
		}},
		{"rule with its own key and no top-level key", noKeyTop, []Rule{
			{Subject: "own.>", Settings: Settings{Enabled: true, Key: otherKey(), Algorithm: AES256CCM, NonceSize: 13, TagLength: 12},
				Set: SetKey | SetAlgorithm | SetNonceSize | SetTagLength},
		}, map[string]sealed{
			"own.x":   {AES256CCM, "default", "13", "12", "other"},
			"other.x": {},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.top, tt.rules)
			if err != nil {
				t.Fatalf("NewPolicy: %v", err)
			}
			got := map[string]sealed{}
			for subj := range tt.want {
				e := message(subj, `{"order_id":"O-1001"}`)
				if err := p.Seal(e); err != nil {
					t.Fatalf("Seal(%s): %v", subj, err)
				}
				got[subj] = describe(t, e, `{"order_id":"O-1001"}`)
				alg, ok := p.Algorithm(subj)
				if ok != (got[subj] != sealed{}) || alg != got[subj].Algorithm {
					t.Errorf("Algorithm(%s) = %q, %t; Seal did %+v", subj, alg, ok, got[subj])
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Seal outcomes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPolicySealChangesOnlyData: encryption replaces Data and nothing else
// (docs/security.md#payload-encryption-keys), and the original payload size stays as received.
func TestPolicySealChangesOnlyData(t *testing.T) {
	p, err := NewPolicy(gcm("orders-2026-05", 12), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Rand = nonceReader{}
	e := message("orders.new", `{"order_id":"O-1001"}`)
	before := *e
	if err := p.Seal(e); err != nil {
		t.Fatal(err)
	}
	if string(e.Data) != specVectors[0].want {
		t.Errorf("Seal data =\n%s\nwant the spec vector\n%s", e.Data, specVectors[0].want)
	}
	after := *e
	after.Data = before.Data
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("Seal changed more than Data (-before +after):\n%s", diff)
	}
}

// TestPolicyNeverSealsOmittedPayloads: headers-only messages keep their
// empty body (docs/migrating.md Q14), while an empty delivered body is encrypted.
func TestPolicyNeverSealsOmittedPayloads(t *testing.T) {
	p, err := NewPolicy(gcm("k", 12), []Rule{{Subject: "audit.>", Settings: Settings{Enabled: true, KeyID: "audit"}, Set: SetKeyID}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"audit.login", "orders.new"} {
		e := message(subj, "")
		e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 2048, SizeHeader: "2048", HasSizeHeader: true}
		if err := p.Seal(e); err != nil {
			t.Fatal(err)
		}
		if len(e.Data) != 0 {
			t.Errorf("Seal(headers-only %s) set Data to %s", subj, e.Data)
		}
		empty := message(subj, "")
		if err := p.Seal(empty); err != nil {
			t.Fatal(err)
		}
		if got := describe(t, empty, ""); got.Algorithm != AES256GCM {
			t.Errorf("Seal(empty payload on %s) = %+v, want encrypted", subj, got)
		}
	}
}

func TestPolicyActive(t *testing.T) {
	off := gcm("k", 12)
	off.Enabled = false
	for _, tt := range []struct {
		name  string
		top   Settings
		rules []Rule
		want  bool
	}{
		{"top enabled", gcm("k", 12), nil, true},
		{"all off", off, nil, false},
		{"only exemptions", off, []Rule{{Subject: "a", Settings: Settings{Enabled: false}}}, false},
		{"one enabled rule", off, []Rule{{Subject: "a", Settings: Settings{Enabled: true}}}, true},
	} {
		p, err := NewPolicy(tt.top, tt.rules)
		if err != nil {
			t.Fatalf("%s: NewPolicy: %v", tt.name, err)
		}
		if got := p.Active(); got != tt.want {
			t.Errorf("%s: Active() = %t, want %t", tt.name, got, tt.want)
		}
	}
	var nilPolicy *Policy
	e := message("x", "data")
	if nilPolicy.Active() || nilPolicy.Seal(e) != nil || string(e.Data) != "data" {
		t.Error("a nil Policy must be inactive and seal nothing")
	}
}

func TestNewPolicyReportsEveryProblem(t *testing.T) {
	badTop := gcm("k", 7)
	noKeyTop := Settings{Algorithm: AES256GCM, KeyID: "default", NonceSize: 12, TagLength: 16}
	for _, tt := range []struct {
		name  string
		top   Settings
		rules []Rule
		want  []string
	}{
		{"top level and rules", badTop, []Rule{
			{Subject: "a..b", Settings: Settings{Enabled: true}},
			{Subject: "c.>", Settings: Settings{Enabled: true, Algorithm: AES256CCM, TagLength: 5}, Set: SetAlgorithm | SetTagLength},
			{Subject: "d", Settings: Settings{Enabled: true, Key: []byte("short")}, Set: SetKey},
		}, []string{
			"encryption.nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 7)",
			"encryption.rules[0].subject: must not contain empty tokens",
			"encryption.rules[0].nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 7)",
			"encryption.rules[1].tag_length: must be one of 4, 6, 8, 10, 12, 14, 16 (got 5)",
			"encryption.rules[2].key: must be exactly 32 bytes for AES-256",
			"encryption.rules[2].nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 7)",
		}},
		{"enabled rule without any key", noKeyTop, []Rule{
			{Subject: "a", Settings: Settings{Enabled: false}},
			{Subject: "b", Settings: Settings{Enabled: true}},
		}, []string{
			"encryption.rules[1].key_b64_env or key_b64 is required because no top-level encryption key is configured",
		}},
		{"enabled top level without key", Settings{Enabled: true, Algorithm: AES256GCM, KeyID: "k", NonceSize: 12}, nil,
			[]string{"encryption.key: must be exactly 32 bytes for AES-256"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.top, tt.rules)
			if err == nil {
				t.Fatalf("NewPolicy succeeded: %+v", p)
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("NewPolicy problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewPolicyKeepsNoKeyReference: changing the caller's key slice after
// NewPolicy does not change what the policy encrypts with.
func TestNewPolicyKeepsNoKeyReference(t *testing.T) {
	s := gcm("k", 12)
	s.Key = testKey()
	p, err := NewPolicy(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	clear(s.Key)
	e := message("x", "data")
	if err := p.Seal(e); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, e, "data"); got.Key != "top" {
		t.Errorf("after clearing the caller's key, Seal used key %q", got.Key)
	}
}

func TestPolicySealErrors(t *testing.T) {
	p, err := NewPolicy(ccmSettings("k", 13, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := message("big.payload", strings.Repeat("x", 70000))
	err = p.Seal(e)
	want := `encrypt payload on subject "big.payload": payload of 70000 bytes is too long for aes-256-ccm with a 13-byte nonce (at most 65535 bytes)`
	if err == nil || err.Error() != want {
		t.Errorf("Seal error = %v, want %q", err, want)
	}
	if len(e.Data) != 70000 {
		t.Error("a failed Seal changed Data")
	}
	p.Rand = failingReader{}
	err = p.Seal(message("s", "secret"))
	if want := `encrypt payload on subject "s": read random nonce: entropy exhausted`; err == nil || err.Error() != want {
		t.Errorf("Seal with a failing random source error = %v, want %q", err, want)
	}
}

// TestPolicyConcurrentSeal runs under -race: the runner seals several
// batches at once with one policy.
func TestPolicyConcurrentSeal(t *testing.T) {
	p, err := NewPolicy(gcm("k", 12), []Rule{{Subject: "c.>", Settings: Settings{Enabled: true, Algorithm: AES256CCM, TagLength: 16}, Set: SetAlgorithm | SetTagLength}})
	if err != nil {
		t.Fatal(err)
	}
	keys := testKeyRing(t, "k")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				data := fmt.Sprintf("goroutine %d message %d", g, i)
				e := message([]string{"c.x", "g.x"}[i%2], data)
				if err := p.Seal(e); err != nil {
					errs <- err
					return
				}
				if pt, err := Decrypt(e.Data, keys); err != nil || string(pt) != data {
					errs <- fmt.Errorf("round trip of %q: %q, %v", data, pt, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkSeal(b *testing.B) {
	p, err := NewPolicy(gcm("k", 12), nil)
	if err != nil {
		b.Fatal(err)
	}
	payload := bytes.Repeat([]byte("a"), 256)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		e := &sink.Envelope{Subject: "orders.new", Data: payload, Payload: sink.PayloadPresence{Present: true}}
		if err := p.Seal(e); err != nil {
			b.Fatal(err)
		}
	}
}
