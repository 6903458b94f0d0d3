package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
)

// TestSinkGetsNumbersAsWritten: the sink decoder receives every number of
// its object as written, so a mapping default like 9007199254740993.5 (no
// float64 holds it) reaches the sink exactly; the other sections still
// decode such tokens like floats.
func TestSinkGetsNumbersAsWritten(t *testing.T) {
	var raw string
	r := sink.NewRegistry()
	r.Register("file", func(b json.RawMessage) (sink.Opener, error) {
		raw = string(b)
		return rawOpener{}, nil
	})
	doc := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"},
		"consumer_management": {"ack_wait_seconds": 2.5},
		"sink": {"type": "file", "x": 9007199254740993.5, "y": [1e2, -0.0, 12]}}`
	c, err := Parse([]byte(doc), "test.json", r, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"x":9007199254740993.5`, `"y":[1e2,-0.0,12]`} {
		if !strings.Contains(raw, want) {
			t.Errorf("sink object %s does not hold %s", raw, want)
		}
	}
	if got := c.ConsumerManagement.AckWaitSeconds; got == nil || *got != 2.5 {
		t.Errorf("ack_wait_seconds = %v, want 2.5", got)
	}
}
