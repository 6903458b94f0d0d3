package config

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// testMappedSink is a TEST STAND-IN for a mapped sink: its "reads" key
// lists the settings that read the payload.
type testMappedSink struct {
	Reads []string `json:"reads"`
}

func (*testMappedSink) Open(context.Context, sink.Deps) (sink.Sink, error) {
	return nil, errors.New("test stand-in: not openable")
}

func (s *testMappedSink) PayloadReads() []string { return s.Reads }

func TestEncryptedPayloadReads(t *testing.T) {
	reg := testRegistry()
	reg.Register("mapped", func(raw json.RawMessage) (sink.Opener, error) {
		var s testMappedSink
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if r, ok := m["reads"]; ok {
			if err := json.Unmarshal(r, &s.Reads); err != nil {
				return nil, err
			}
		}
		return &s, nil
	})
	const key = `"key_b64": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="`
	for _, tt := range []struct {
		name       string
		nats       string // nats.subject
		filters    string // consumer_management.filter_subjects, JSON
		encryption string
		reads      string
		want       []string // problem lines; nil = loads
	}{
		{"top level enabled", "orders.>", `[]`, `{"enabled": true, ` + key + `}`, `["mapping[1].path"]`,
			[]string{`sink.mapping[1].path: cannot map the payload of encrypted subjects: encryption applies to "orders.>" (encryption.enabled); the sink receives only ciphertext`}},
		{"overlapping enabled rule", "orders.>", `[]`, `{` + key + `, "rules": [{"subject": "orders.secure.>"}]}`, `["mapping[1].path", "mapping[3].path"]`,
			[]string{`sink.mapping[1].path: cannot map the payload of encrypted subjects: encryption applies to "orders.secure.>" (encryption.rules[0]); the sink receives only ciphertext`}},
		{"rule containing the filter", "orders.>", `["orders.created"]`, `{` + key + `, "rules": [{"subject": "orders.*"}]}`, `["idempotency.payload_field"]`,
			[]string{`sink.idempotency.payload_field: cannot map the payload of encrypted subjects: encryption applies to "orders.*" (encryption.rules[0]); the sink receives only ciphertext`}},
		{"exemption containing the filter loads", "orders.>", `[]`, `{"enabled": true, ` + key + `, "rules": [{"subject": "orders.>", "enabled": false}]}`, `["mapping[0].path"]`, nil},
		{"an exemption decides before a later enabled rule", "orders.>", `["orders.public.>"]`, `{` + key + `, "rules": [{"subject": "orders.public.>", "enabled": false}, {"subject": "orders.>"}]}`, `["mapping[0].path"]`, nil},
		{"overlapping exemption leaves the rest to the top level", "orders.>", `[]`, `{"enabled": true, ` + key + `, "rules": [{"subject": "orders.public.>", "enabled": false}]}`, `["mapping[0].path"]`,
			[]string{`sink.mapping[0].path: cannot map the payload of encrypted subjects: encryption applies to "orders.>" (encryption.enabled); the sink receives only ciphertext`}},
		{"second filter encrypted", "orders.>", `["orders.public.>", "orders.secure.>"]`, `{` + key + `, "rules": [{"subject": "orders.secure.>"}]}`, `["mapping[0].path"]`,
			[]string{`sink.mapping[0].path: cannot map the payload of encrypted subjects: encryption applies to "orders.secure.>" (encryption.rules[0]); the sink receives only ciphertext`}},
		{"disjoint rule loads", "orders.>", `[]`, `{` + key + `, "rules": [{"subject": "audit.>"}]}`, `["mapping[0].path"]`, nil},
		{"no payload reads loads", "orders.>", `[]`, `{"enabled": true, ` + key + `}`, `[]`, nil},
		{"encryption off loads", "orders.>", `[]`, `{}`, `["mapping[0].path"]`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"nats": {"stream": "S", "consumer": "c", "subject": "` + tt.nats + `"},
 "consumer_management": {"filter_subjects": ` + tt.filters + `},
 "encryption": ` + tt.encryption + `,
 "sink": {"type": "mapped", "reads": ` + tt.reads + `}}`
			_, err := Parse([]byte(doc), "c.json", reg, noEnv)
			var got []string
			if err != nil {
				ce, ok := errors.AsType[*Error](err)
				if !ok {
					t.Fatalf("Parse: %v", err)
				}
				for _, pr := range ce.Problems {
					got = append(got, pr.Path+": "+pr.Message)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse problems mismatch (-want +got):\n%s\nconfig:\n%s", diff, doc)
			}
		})
	}
}
