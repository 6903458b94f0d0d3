package config

import (
	"path/filepath"
	"testing"
)

// TestExamples loads every example configuration, so documentation cannot
// rot. The file sink is the test stand-in of helpers_test.go.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples found in ../examples")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f, testRegistry(), noEnv)
			if err != nil {
				t.Fatalf("Load(%s): %v", f, err)
			}
			if c.Sink.Type != "file" || c.Sink.Opener == nil {
				t.Errorf("Load(%s): sink = %q, %v; want a file sink", f, c.Sink.Type, c.Sink.Opener)
			}
			if _, err := c.Effective(); err != nil {
				t.Errorf("Effective: %v", err)
			}
		})
	}
}
