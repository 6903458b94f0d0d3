package spoolfile

import (
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// marshalEncrypted returns the wrapper's encrypted_record as envelope bytes.
func marshalEncrypted(t *testing.T, w *Wrapper) []byte {
	t.Helper()
	env, ok := w.doc["encrypted_record"].(map[string]any)
	if !ok {
		t.Fatalf("wrapper %s has no encrypted_record object", w.Name)
	}
	return jsonx.Marshal(env, jsonx.ASCII)
}
