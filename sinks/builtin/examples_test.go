package builtin_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// TestExamples loads every configuration under examples/ with the full
// registry, as `nats-sink validate` does, so the documented examples cannot
// rot. An example for sink type T is named T.json or T-*.json; every
// built-in type has at least one.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		wantType, _, _ := strings.Cut(name, "-")
		t.Run(name, func(t *testing.T) {
			// Env-backed secrets are resolved at start, not at load: an
			// empty environment must still load every example.
			c, err := config.Load(f, builtin.Registry(), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatalf("Load(%s): %v", f, err)
			}
			if c.Sink.Type != wantType || c.Sink.Opener == nil {
				t.Errorf("Load(%s): sink type %q (opener %v); the file name says %q", f, c.Sink.Type, c.Sink.Opener != nil, wantType)
			}
			if _, err := c.Effective(); err != nil {
				t.Errorf("Effective: %v", err)
			}
		})
		covered[wantType] = true
	}
	for typ := range builtin.Prototypes() {
		if !covered[typ] {
			t.Errorf("no example configuration for sink type %q under examples/", typ)
		}
	}
}
