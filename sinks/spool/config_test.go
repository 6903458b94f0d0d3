package spool

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func problems(err error) []string {
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok {
		if err == nil {
			return nil
		}
		return []string{"not a ConfigError: " + err.Error()}
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

func TestDecodeDefaults(t *testing.T) {
	op, err := Decode([]byte(`{"type":"spool","directory":"/var/spool/x","allow_unencrypted":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := ConfigOf(op)
	if !ok {
		t.Fatalf("ConfigOf(%T) failed", op)
	}
	want := Default()
	want.Directory = "/var/spool/x"
	want.AllowUnencrypted = true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded defaults (-want +got):\n%s", diff)
	}
	if want.MaxRecords != 100000 || want.MaxBytes != 10737418240 || !want.IncludeMetadata || !want.Fsync ||
		!want.CreateDirectory || !want.DeleteAfterReplay || want.DrainOrdering != "priority" || want.Pretty {
		t.Errorf("Default() = %+v, not the documented defaults", want)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      []string
	}{
		{"directory absent", `{"type":"spool","allow_unencrypted":true}`, []string{"directory: required"}},
		{"directory blank", `{"type":"spool","directory":"  ","allow_unencrypted":true}`, []string{"directory: must not be empty"}},
		{"ranges and enums", `{"type":"spool","directory":"d","allow_unencrypted":true,"max_records":0,"max_bytes":1024,"duplicate_policy":"overwrite","drain_ordering":"lifo"}`, []string{
			"max_records: must be between 1 and 10000000 (got 0)",
			"max_bytes: must be between 1048576 and 1099511627776 (got 1024)",
			`duplicate_policy: must be one of skip_existing, fail (got "overwrite")`,
			`drain_ordering: must be one of priority, fifo (got "lifo")`,
		}},
		{"encryption required", `{"type":"spool","directory":"d"}`, []string{
			"encryption.enabled: the spool sink requires record encryption; set it to true (or set sink.allow_unencrypted to true for local development)",
		}},
		{"enabled without key", `{"type":"spool","directory":"d","encryption":{"enabled":true}}`, []string{
			"encryption: key_b64_env or key_b64 is required because sink.encryption.enabled is true",
		}},
		{"gcm nonce", `{"type":"spool","directory":"d","encryption":{"enabled":true,"key_b64_env":"K","nonce_size_bytes":7}}`, []string{
			"encryption.nonce_size_bytes: must be between 8 and 13 for aes-256-gcm (got 7)",
		}},
		{"bad key material", `{"type":"spool","directory":"d","encryption":{"enabled":true,"key_b64":"c2hvcnQ="}}`, []string{
			"encryption.key_b64: must decode to exactly 32 bytes for AES-256",
		}},
		{"two key sources", `{"type":"spool","directory":"d","encryption":{"enabled":true,"key_b64_env":"K","key_b64_file":"/k"}}`, []string{
			"encryption.key_b64: set only one of key_b64, key_b64_env, key_b64_file",
		}},
		{"encryption keys", `{"type":"spool","directory":"d","encryption":{"enabled":true,"key_b64_env":"K","algorithm":"aes-128","tag_length":5,"key_id":" "}}`, []string{
			`encryption.algorithm: must be one of aes-256-gcm, aes-256-ccm (got "aes-128")`,
			"encryption.key_id: must not be empty",
			"encryption.tag_length: must be one of 4, 6, 8, 10, 12, 14, 16 (got 5)",
		}},
		{"unknown key", `{"type":"spool","directory":"d","allow_unencrypted":true,"max_record":1}`, []string{"max_record: unknown key"}},
		{"every problem at once", `{"type":"spool","max_records":0}`, []string{
			"directory: required",
			"max_records: must be between 1 and 10000000 (got 0)",
			"encryption.enabled: the spool sink requires record encryption; set it to true (or set sink.allow_unencrypted to true for local development)",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.raw))
			got := problems(err)
			if tt.name == "unknown key" { // the decoder's own wording
				if len(got) != 1 || !strings.HasPrefix(got[0], "max_record: ") {
					t.Errorf("Decode(%s) problems = %q, want one at max_record", tt.raw, got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	for _, raw := range []string{
		`{"type":" SPOOL ","directory":"d","encryption":{"enabled":true,"key_b64_env":"SPOOL_KEY","algorithm":"AES_256_CCM","nonce_size_bytes":13,"tag_length":8}}`,
		`{"type":"spool","directory":"d","encryption":{"enabled":true,"key_b64":"` + testKey + `","rules":[{"subject":"a.>","enabled":false}]}}`,
		`{"type":"spool","directory":"~/spool","allow_unencrypted":true,"drain_ordering":"fifo","duplicate_policy":"fail","payload_mode":"bytes_envelope","max_records":1,"max_bytes":1048576}`,
	} {
		if _, err := Decode([]byte(raw)); err != nil {
			t.Errorf("Decode(%s) = %v", raw, err)
		}
	}
}

// TestValidateByHand: Open calls Validate first, so a Config built in code
// gets the same problems as a decoded one.
func TestValidateByHand(t *testing.T) {
	c := Default()
	c.MaxRecords = 0
	c.DuplicatePolicy = "overwrite"
	want := []string{
		"directory: required",
		"max_records: must be between 1 and 10000000 (got 0)",
		`duplicate_policy: must be one of skip_existing, fail (got "overwrite")`,
		"encryption.enabled: the spool sink requires record encryption; set it to true (or set sink.allow_unencrypted to true for local development)",
	}
	if diff := cmp.Diff(want, problems(c.Validate())); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	if _, err := c.Open(t.Context(), sink.Deps{}); diff(want, problems(err)) != "" {
		t.Errorf("Open = %v, want the Validate problems", err)
	}
}

func diff(a, b []string) string { return cmp.Diff(a, b) }

func TestWarnings(t *testing.T) {
	c := plain(t)
	c.Encryption.Rules = []EncryptionRule{{Subject: "a.>"}}
	want := []string{
		"allow_unencrypted: spool records are written unencrypted",
		"encryption.rules: ignored by the spool sink (records use the section's own key)",
	}
	if d := cmp.Diff(want, c.Warnings()); d != "" {
		t.Errorf("Warnings (-want +got):\n%s", d)
	}
	if w := config(t).Warnings(); len(w) != 0 {
		t.Errorf("encrypted config warnings = %q, want none", w)
	}
}

// TestSecretMasked: key material never prints.
func TestSecretMasked(t *testing.T) {
	c := config(t)
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, testKey) {
			t.Errorf("printed config contains the key: %s", s)
		}
	}
}
