package cli_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

const committedSchema = "../schema/nats-sink.schema.json"

// TestCommittedSchema fails when schema/nats-sink.schema.json is stale: the
// schema is generated from the configuration types (docs/configuration.md).
// Regenerate with NATS_SINK_UPDATE=1 go test ./cli -run TestCommittedSchema.
func TestCommittedSchema(t *testing.T) {
	got, err := config.Schema(builtin.Prototypes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsonx.Parse(got); err != nil {
		t.Fatalf("generated schema is not valid JSON: %v", err)
	}
	if os.Getenv("NATS_SINK_UPDATE") != "" {
		if err := os.WriteFile(committedSchema, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(committedSchema)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; regenerate it with: NATS_SINK_UPDATE=1 go test ./cli -run TestCommittedSchema", committedSchema)
	}
}
