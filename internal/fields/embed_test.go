package fields

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// shared is a block of keys that several configs embed inline.
type shared struct {
	Table string `json:"table" nonblank:"true"`
	Size  int    `json:"size" min:"1"`
	Set   bool   `json:"-" presence:"size"`
}

type embedding struct {
	First string `json:"first"`
	shared
	Last string `json:"last" enum:"x"`
}

func TestEmbeddedStructIsInline(t *testing.T) {
	c := embedding{shared: shared{Table: "t", Size: 3}}
	err := DecodeSink([]byte(`{"size":0,"table":"","last":"y","first":"a","nested":1}`), &c)
	ce, ok := err.(*sink.ConfigError)
	if !ok {
		t.Fatalf("DecodeSink = %v, want *sink.ConfigError", err)
	}
	// Problems follow field order with the embedded keys in the position
	// of the embedding field, and unknown keys last.
	want := []sink.Problem{
		{Path: "table", Message: "must not be empty"},
		{Path: "size", Message: "must be at least 1 (got 0)"},
		{Path: "last", Message: `must be one of x (got "y")`},
		{Path: "nested", Message: "unknown key"},
	}
	if diff := cmp.Diff(want, ce.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	c = embedding{shared: shared{Table: "t", Size: 3}}
	if err := DecodeSink([]byte(`{"table":"u","size":5}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Table != "u" || c.Size != 5 || !c.Set {
		t.Errorf("decoded %+v", c)
	}
	if got := Effective(c); !cmp.Equal(got, map[string]any{"first": "", "table": "u", "size": int64(5), "last": ""}) {
		t.Errorf("Effective = %v", got)
	}
	props := Schema(c)["properties"].(map[string]any)
	if _, ok := props["table"]; !ok || len(props) != 4 {
		t.Errorf("schema properties = %v", props)
	}
}
