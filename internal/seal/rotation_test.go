package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestKeyRotation follows the rotation procedure of docs/security.md: a
// process restarted with a new key_id and key writes new data under the
// new id, while data written before stays readable with the old key. A key
// ring holding both ids opens both; without the old key the old data fails
// with ErrUnknownKey rather than with garbage; and relabelling an old
// envelope with the new id does not open it.
func TestKeyRotation(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{0x11}, KeySize), bytes.Repeat([]byte{0x22}, KeySize)
	seal := func(id string, key []byte, subject, data string) []byte {
		t.Helper()
		p, err := NewPolicy(Settings{Enabled: true, Algorithm: AES256GCM, KeyID: id, Key: key, NonceSize: 12, TagLength: 16}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := message(subject, data)
		if err := p.Seal(e); err != nil {
			t.Fatal(err)
		}
		return e.Data
	}
	// Before the restart: the April key. After: the May key.
	before := seal("orders-2026-04", oldKey, "orders.new", `{"n":1}`)
	after := seal("orders-2026-05", newKey, "orders.new", `{"n":2}`)
	for _, c := range []struct {
		doc    []byte
		wantID string
	}{{before, "orders-2026-04"}, {after, "orders-2026-05"}} {
		if got := parseEnvelope(t, c.doc)["key_id"]; got != c.wantID {
			t.Errorf("envelope key_id = %v, want %s", got, c.wantID)
		}
	}

	key := func(id string, b []byte) Key {
		k := Key{ID: id}
		copy(k.Secret[:], b)
		return k
	}
	both, err := NewKeyRing(key("orders-2026-04", oldKey), key("orders-2026-05", newKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		doc  []byte
		want string
	}{{before, `{"n":1}`}, {after, `{"n":2}`}} {
		pt, err := Decrypt(c.doc, both)
		if err != nil || string(pt) != c.want {
			t.Errorf("Decrypt with both keys = %q, %v; want %q", pt, err, c.want)
		}
	}

	newOnly, err := NewKeyRing(key("orders-2026-05", newKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decrypt(before, newOnly); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("old data without the old key: error %v, want ErrUnknownKey", err)
	}
	if pt, err := Decrypt(after, newOnly); err != nil || string(pt) != `{"n":2}` {
		t.Errorf("new data with the new key only = %q, %v", pt, err)
	}

	// key_id is not authenticated, but the key is: an old envelope
	// relabelled with the new id fails authentication.
	relabelled := []byte(strings.Replace(string(before), `"key_id":"orders-2026-04"`, `"key_id":"orders-2026-05"`, 1))
	if bytes.Equal(relabelled, before) {
		t.Fatal("relabelling did not change the envelope")
	}
	if _, err := Decrypt(relabelled, both); !errors.Is(err, ErrDecrypt) {
		t.Errorf("relabelled envelope: error %v, want ErrDecrypt", err)
	}
}

// TestRotationPerRule: during a staged rotation one subject family moves
// to the new key while the rest keeps the old one; each envelope names the
// key that opens it.
func TestRotationPerRule(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{0x11}, KeySize), bytes.Repeat([]byte{0x22}, KeySize)
	p, err := NewPolicy(
		Settings{Enabled: true, Algorithm: AES256GCM, KeyID: "k-old", Key: oldKey, NonceSize: 12, TagLength: 16},
		[]Rule{{Subject: "payments.>", Settings: Settings{Enabled: true, KeyID: "k-new", Key: newKey}, Set: SetKeyID | SetKey}},
	)
	if err != nil {
		t.Fatal(err)
	}
	var ks [2]Key
	ks[0].ID, ks[1].ID = "k-old", "k-new"
	copy(ks[0].Secret[:], oldKey)
	copy(ks[1].Secret[:], newKey)
	ring, err := NewKeyRing(ks[:]...)
	if err != nil {
		t.Fatal(err)
	}
	for subject, wantID := range map[string]string{"payments.card": "k-new", "orders.new": "k-old"} {
		e := message(subject, `{"s":"`+subject+`"}`)
		if err := p.Seal(e); err != nil {
			t.Fatal(err)
		}
		if got := parseEnvelope(t, e.Data)["key_id"]; got != wantID {
			t.Errorf("%s: key_id %v, want %s", subject, got, wantID)
		}
		if pt, err := Decrypt(e.Data, ring); err != nil || string(pt) != `{"s":"`+subject+`"}` {
			t.Errorf("%s: Decrypt = %q, %v", subject, pt, err)
		}
	}
}
