package fields

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

type withAny struct {
	Default any     `json:"default" doc:"Any JSON value."`
	Count   int     `json:"count" min:"1"`
	Ratio   float64 `json:"ratio"`
}

// TestAnyValueAndExactNumbers checks an "any JSON value" key (kept as the
// tree value, null = nil, in the schema without a type) and that a tree
// from jsonx.ParseExact decodes like one from jsonx.Parse.
func TestAnyValueAndExactNumbers(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want withAny
	}{
		{`{"default": 9007199254740993.0, "count": 5.0, "ratio": 2.5}`,
			withAny{Default: jsonx.Number("9007199254740993.0"), Count: 5, Ratio: 2.5}},
		{`{"default": {"a": [1, "x"]}}`, withAny{Default: map[string]any{"a": []any{jsonx.Integer("1"), "x"}}, Count: 1}},
		{`{"default": null}`, withAny{Count: 1}},
	} {
		tree, err := jsonx.ParseExact([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		got := withAny{Default: "preset", Count: 1}
		var p Problems
		Decode(tree, &got, "", &p)
		if p.Len() > 0 {
			t.Fatalf("Decode(%s): %v", tt.doc, p.List())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.doc, diff)
		}
	}
	s := Schema(withAny{})
	prop := s["properties"].(map[string]any)["default"].(map[string]any)
	if _, typed := prop["type"]; typed {
		t.Errorf("schema of an any key = %v, want no type", prop)
	}
	if eff := Effective(withAny{Default: jsonx.Integer("7"), Count: 1}); eff["default"] != jsonx.Integer("7") {
		t.Errorf("Effective default = %#v, want the tree value", eff["default"])
	}
}
