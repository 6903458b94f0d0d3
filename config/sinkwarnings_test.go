package config

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// warnOpener is an Opener with load warnings of its own, as the spool
// sink has.
type warnOpener struct{ rawOpener }

func (warnOpener) Warnings() []string { return []string{"allow_unencrypted: records are plaintext"} }

// TestSinkWarnings: a sink's own load warnings get the "sink." prefix and
// follow the section warnings.
func TestSinkWarnings(t *testing.T) {
	r := sink.NewRegistry()
	r.Register("warner", func(json.RawMessage) (sink.Opener, error) { return warnOpener{}, nil })
	c, err := Parse([]byte(`{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "advisories": {}, "sink": {"type": "warner"}}`), "test.json", r, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"advisories: ignored (feature not supported; section is disabled)",
		"sink.allow_unencrypted: records are plaintext",
	}
	if d := cmp.Diff(want, c.Warnings); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}
