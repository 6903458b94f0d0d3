package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	k1B64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	edB64 = "Kay64UG8yvCyLhqU000LxzYeUm0L/hLIl5S8kyKWbdc="
)

func TestIntegrityProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []Problem
	}{
		{"enabled without rules", doc("", `"message_authenticity": {"enabled": true}`), []Problem{
			{Path: "message_authenticity.rules", Message: "must not be empty when message_authenticity.enabled is true"}}},
		{"upstream example loads", doc("", `"message_authenticity": {"enabled": true, "rules": [
			{"subject": "orders.>", "key_id": "orders-hmac-1", "key_b64": "`+k1B64+`"},
			{"subject": "sensor.>", "algorithm": "ED25519", "key_id": "ed", "key_b64_env": "ED_KEY", "signed_fields": "subject"}]},
			"custody": {"enabled": true, "algorithm": "SHA_512", "key_id": "custody-policy-v1", "include_previous_hash": true}`), nil},
		{"headers", doc("", `"message_authenticity": {"unmatched_subject_action": "Allow", "signature_header": " ", "algorithm_header": "A\u0001", "key_id_header": "x"}`), []Problem{
			{Path: "message_authenticity.unmatched_subject_action", Message: `must be one of allow, reject (got "Allow")`},
			{Path: "message_authenticity.signature_header", Message: "must not be empty"},
			{Path: "message_authenticity.algorithm_header", Message: "must not contain control characters"},
		}},
		{"headers distinct", doc("", `"message_authenticity": {"signature_header": "X-Sig", "key_id_header": "x-sig"}`), []Problem{
			{Path: "message_authenticity", Message: "signature_header, algorithm_header and key_id_header must be distinct"}}},
		{"rules", doc("", `"message_authenticity": {"rules": [
			{"subject": "a..b", "algorithm": "rsa", "key_b64": "`+k1B64+`", "key_b64_env": "K"},
			{"subject": "b.>", "key_id": "k"},
			{"subject": "c.>", "key_id": "k", "key_b64_env": "lower", "signed_fields": ["subject", "payload"]},
			{"subject": "d.>", "key_id": "k", "algorithm": "ed25519", "key_b64": "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},
			{"subject": "e.>", "key_id": "k", "key_b64": "AAAA", "additional_keys": [{"key_id": "k", "key_b64": "`+k1B64+`"}, {"key_id": "j"}]},
			{"subject": "f.>", "enabled": false, "key_b64": "not base64"}]}`), []Problem{
			{Path: "message_authenticity.rules[0]", Message: "set only one of key_b64, key_b64_env, key_b64_file"},
			{Path: "message_authenticity.rules[0].subject", Message: `must be a valid subject pattern (got "a..b")`},
			{Path: "message_authenticity.rules[0].algorithm", Message: `must be one of hmac-sha256, ed25519 (got "rsa")`},
			{Path: "message_authenticity.rules[0].key_id", Message: "required when the rule is enabled"},
			{Path: "message_authenticity.rules[1]", Message: "key_b64, key_b64_env or key_b64_file is required when the rule is enabled"},
			{Path: "message_authenticity.rules[2].key_b64_env", Message: `must use uppercase letters, digits or "_"`},
			{Path: "message_authenticity.rules[2].signed_fields[1]", Message: `must be one of classification, labels, message_id, mission_metadata, priority, security_labels, subject (got "payload")`},
			{Path: "message_authenticity.rules[3].key_b64", Message: "is not a valid Ed25519 public key"},
			{Path: "message_authenticity.rules[4].key_b64", Message: "must decode to 32-1024 bytes for HMAC-SHA256"},
			{Path: "message_authenticity.rules[4].additional_keys[0].key_id", Message: `duplicate key_id "k"`},
			{Path: "message_authenticity.rules[4].additional_keys[1]", Message: "key_b64, key_b64_env or key_b64_file is required when the rule is enabled"},
		}},
		{"custody", doc("", `"custody": {"enabled": true, "hash_payload": false, "hash_metadata": false, "algorithm": "sha-256",
			"previous_hash_header": "X\nY", "max_hash_input_bytes": 10, "key_id": "`+strings.Repeat("é", 129)+`"}`), []Problem{
			{Path: "custody", Message: "enabled requires hash_payload or hash_metadata"},
			{Path: "custody.algorithm", Message: `must be one of sha256, sha512 (got "sha-256")`},
			{Path: "custody.previous_hash_header", Message: "must not contain control characters"},
			{Path: "custody.key_id", Message: "must not exceed 128 characters"},
			{Path: "custody.max_hash_input_bytes", Message: "must be between 1024 and 1073741824 (got 10)"},
		}},
		{"custody key id number", doc("", `"custody": {"key_id": 7}`), []Problem{{Path: "custody.key_id", Message: "expected string (got number)"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "test.json", testRegistry(), noEnv)
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("Parse problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIntegrityNormalisation(t *testing.T) {
	d := doc("", `"message_authenticity": {"rules": [{"subject": "a.>", "algorithm": " HMAC_SHA256 ", "key_id": " k ", "key_b64": "`+k1B64+`",
		"signed_fields": ["Subject", "message-id", "SUBJECT"]}, {"subject": "b.>", "key_id": "k", "key_b64": "`+k1B64+`", "signed_fields": []},
		{"subject": "c.>", "key_id": "k", "key_b64": "`+k1B64+`", "signed_fields": null}]},
		"custody": {"algorithm": "SHA_512", "key_id": "  "}`)
	c, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := c.MessageAuthenticity.Rules
	if r[0].Algorithm != "hmac-sha256" || *r[0].KeyID != "k" {
		t.Errorf("rule 0 = %q %q", r[0].Algorithm, *r[0].KeyID)
	}
	if diff := cmp.Diff([]string{"subject", "message_id"}, r[0].Fields()); diff != "" {
		t.Errorf("rule 0 fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{}, r[1].Fields()); diff != "" {
		t.Errorf("rule 1 fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"subject", "message_id"}, r[2].Fields()); diff != "" {
		t.Errorf("rule 2 fields (-want +got):\n%s", diff)
	}
	if c.Custody.Algorithm != "sha512" || c.Custody.KeyID != nil {
		t.Errorf("custody = %q %v", c.Custody.Algorithm, c.Custody.KeyID)
	}
	const warn = "message_authenticity.rules[1].signed_fields: empty; signatures are not bound to subject or message id"
	found := false
	for _, w := range c.Warnings {
		found = found || w == warn
	}
	if !found {
		t.Errorf("Warnings = %q, want %q", c.Warnings, warn)
	}
}

func TestIntegrityOverrides(t *testing.T) {
	env := func(n string) (string, bool) {
		v, ok := map[string]string{
			"NATS_SINKS_MESSAGE_AUTHENTICITY_SIGNATURE_HEADER": "X-Sig",
			"NATS_SINKS_CUSTODY_ENABLED":                       "true",
			"NATS_SINKS_CUSTODY_ALGORITHM":                     "SHA512",
			"NATS_SINKS_CUSTODY_KEY_ID":                        "",
		}[n]
		return v, ok
	}
	c, err := Parse([]byte(doc("", `"custody": {"key_id": "x"}`)), "test.json", testRegistry(), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.MessageAuthenticity.SignatureHeader != "X-Sig" || !c.Custody.Enabled || c.Custody.Algorithm != "sha512" || c.Custody.KeyID != nil {
		t.Errorf("overrides not applied: %+v %+v", c.MessageAuthenticity, c.Custody)
	}
}

func TestAuthenticityKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(file, []byte(edB64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := doc("", `"message_authenticity": {"rules": [{"subject": "a.>", "key_id": "k", "key_b64_env": "AUTH_K", "additional_keys": [{"key_id": "j", "key_b64": "`+k1B64+`"}]},
		{"subject": "b.>", "algorithm": "ed25519", "key_id": "e", "key_b64_file": "`+file+`"}, {"subject": "c.>", "key_id": "k", "key_b64_env": "UNSET_K"},
		{"subject": "d.>", "key_id": "k", "key_b64_env": "SHORT_K"}]}`)
	// validate reads no key variable: loading succeeds with none set.
	c, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	env := Env(func(n string) (string, bool) {
		v, ok := map[string]string{"AUTH_K": k1B64, "SHORT_K": "AAAA"}[n]
		return v, ok
	})
	keys, err := c.MessageAuthenticity.AuthenticityKeys(0, env)
	if err != nil || len(keys) != 2 || keys[0].ID != "k" || keys[1].ID != "j" || len(keys[0].Material) != 32 {
		t.Errorf("AuthenticityKeys(0) = %v, %v", keys, err)
	}
	if keys, err := c.MessageAuthenticity.AuthenticityKeys(1, env); err != nil || len(keys[0].Material) != 32 {
		t.Errorf("AuthenticityKeys(1) = %v, %v", keys, err)
	}
	for i, want := range map[int]string{
		2: "message_authenticity.rules[2].key_b64_env: environment variable UNSET_K is not set",
		3: "message_authenticity.rules[3].key_b64_env: environment variable SHORT_K must decode to 32-1024 bytes for HMAC-SHA256",
	} {
		_, err := c.MessageAuthenticity.AuthenticityKeys(i, env)
		if err == nil || err.Error() != want || !strings.Contains(err.Error(), "") {
			t.Errorf("AuthenticityKeys(%d) error = %v, want %q", i, err, want)
		}
	}
}
