package fields

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

type item struct {
	Name   string `json:"name" required:"true" trim:"true" lower:"true" pattern:"^[a-z]+$"`
	Weight int    `json:"weight" min:"1" max:"100"`
}

func (i *item) SetDefaults() { *i = item{Weight: 1} }

type inner struct {
	Flag  bool    `json:"flag"`
	Ratio float64 `json:"ratio" min:"0.0" max:"1.0"`
}

type sample struct {
	Type    string            `json:"type"`
	Count   int               `json:"count" min:"1" max:"10000"`
	Ratio   float64           `json:"ratio" min:"1.0" max:"10.0"`
	Enabled bool              `json:"enabled"`
	Mode    string            `json:"mode" enum:"fixed,linear,exponential"`
	Name    *string           `json:"name" trim:"true" blanknull:"true"`
	Level   string            `json:"level" trim:"true" upper:"true" enum:"DEBUG,INFO"`
	Timeout *float64          `json:"timeout" xmin:"0" max:"86400"`
	Backoff *[]float64        `json:"backoff" strict:"true" minitems:"1" xmin:"0" max:"10"`
	Filters []string          `json:"filters" null:"empty" unique:"true"`
	Labels  []string          `json:"labels" null:"empty" orstring:";"`
	Tag     int               `json:"tag" enum:"4,8,16"`
	Items   []item            `json:"items"`
	Meta    map[string]string `json:"meta" null:"empty" maxitems:"2"`
	Inner   inner             `json:"inner"`
	Secret  *string           `json:"secret" secret:"true"`
	Req     string            `json:"req" required:"true" nonblank:"true"`
	Key     *string           `json:"key" null:"reject"`
	HasKey  bool              `json:"-" presence:"key"`
}

func defaults() *sample {
	return &sample{Count: 100, Ratio: 2, Mode: "exponential", Level: "INFO", Filters: []string{}, Labels: []string{},
		Tag: 16, Items: []item{{Name: "default", Weight: 1}}, Meta: map[string]string{}}
}

func decode(t *testing.T, doc string) (*sample, []sink.Problem) {
	t.Helper()
	tree, err := jsonx.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("jsonx.Parse(%s): %v", doc, err)
	}
	s := defaults()
	var p Problems
	Decode(tree, s, "", &p)
	return s, p.List()
}

func ptr[T any](v T) *T { return &v }

func TestDecodeAccepts(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want func(*sample)
	}{
		{"defaults kept", `{"req":"x"}`, func(*sample) {}},
		{"integer from 5.0", `{"req":"x","count":5.0}`, func(s *sample) { s.Count = 5 }},
		{"integer from string", `{"req":"x","count":" +1_000 "}`, func(s *sample) { s.Count = 1000 }},
		{"integer from string with zero fraction", `{"req":"x","count":"5.00"}`, func(s *sample) { s.Count = 5 }},
		{"number from integer", `{"req":"x","ratio":3}`, func(s *sample) { s.Ratio = 3 }},
		{"number from string", `{"req":"x","ratio":"2.5"}`, func(s *sample) { s.Ratio = 2.5 }},
		{"number from exponent string", `{"req":"x","ratio":"1e0"}`, func(s *sample) { s.Ratio = 1 }},
		{"number from leading-dot string", `{"req":"x","inner":{"ratio":".5"}}`, func(s *sample) { s.Inner.Ratio = 0.5 }},
		{"number from trailing-dot string", `{"req":"x","ratio":"1."}`, func(s *sample) { s.Ratio = 1 }},
		{"boolean yes", `{"req":"x","enabled":"YES"}`, func(s *sample) { s.Enabled = true }},
		{"boolean 1", `{"req":"x","enabled":1}`, func(s *sample) { s.Enabled = true }},
		{"boolean 1.0", `{"req":"x","enabled":1.0}`, func(s *sample) { s.Enabled = true }},
		{"boolean off", `{"req":"x","enabled":"off"}`, func(s *sample) { s.Enabled = false }},
		{"nullable null", `{"req":"x","name":null}`, func(*sample) {}},
		{"blank becomes null", `{"req":"x","name":"  "}`, func(*sample) {}},
		{"trimmed", `{"req":"x","name":" a "}`, func(s *sample) { s.Name = ptr("a") }},
		{"upper-cased enum", `{"req":"x","level":" debug "}`, func(s *sample) { s.Level = "DEBUG" }},
		{"null means empty", `{"req":"x","filters":null}`, func(*sample) {}},
		{"string split", `{"req":"x","labels":"a;b"}`, func(s *sample) { s.Labels = []string{"a", "b"} }},
		{"items start from defaults", `{"req":"x","items":[{"name":" A "}]}`, func(s *sample) { s.Items = []item{{Name: "a", Weight: 1}} }},
		{"presence recorded", `{"req":"x","key":"k"}`, func(s *sample) { s.Key = ptr("k"); s.HasKey = true }},
		{"int enum", `{"req":"x","tag":8}`, func(s *sample) { s.Tag = 8 }},
		{"exclusive min", `{"req":"x","timeout":0.5}`, func(s *sample) { s.Timeout = ptr(0.5) }},
		{"strict numbers", `{"req":"x","backoff":[1,2.5]}`, func(s *sample) { s.Backoff = &[]float64{1, 2.5} }},
		{"map", `{"req":"x","meta":{"a":"b"}}`, func(s *sample) { s.Meta = map[string]string{"a": "b"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := decode(t, tt.doc)
			if len(problems) > 0 {
				t.Fatalf("Decode(%s) problems: %v", tt.doc, problems)
			}
			want := defaults()
			want.Req = "x"
			tt.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.doc, diff)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []sink.Problem
	}{
		{"required", `{}`, []sink.Problem{{Path: "req", Message: "required"}}},
		{"root not object", `[]`, []sink.Problem{{Path: "(root)", Message: "expected object (got array)"}}},
		{"unknown key with suggestion", `{"req":"x","cuont":1}`, []sink.Problem{{Path: "cuont", Message: `unknown key (did you mean "count")`}}},
		{"unknown key without suggestion", `{"req":"x","zzzzzz":1}`, []sink.Problem{{Path: "zzzzzz", Message: "unknown key"}}},
		{"range", `{"req":"x","count":0}`, []sink.Problem{{Path: "count", Message: "must be between 1 and 10000 (got 0)"}}},
		{"range from string", `{"req":"x","count":"20_000"}`, []sink.Problem{{Path: "count", Message: "must be between 1 and 10000 (got 20000)"}}},
		{"huge integer", `{"req":"x","count":123456789012345678901234567890}`, []sink.Problem{{Path: "count", Message: "must be between 1 and 10000 (got 123456789012345678901234567890)"}}},
		{"boolean for integer (Q24)", `{"req":"x","count":true}`, []sink.Problem{{Path: "count", Message: "expected integer (got boolean)"}}},
		{"boolean for number (Q24)", `{"req":"x","ratio":false}`, []sink.Problem{{Path: "ratio", Message: "expected number (got boolean)"}}},
		{"fraction for integer", `{"req":"x","count":5.5}`, []sink.Problem{{Path: "count", Message: "expected integer (got number)"}}},
		{"fraction string for integer", `{"req":"x","count":"5.5"}`, []sink.Problem{{Path: "count", Message: "expected integer (got string)"}}},
		{"double underscore", `{"req":"x","count":"1__000"}`, []sink.Problem{{Path: "count", Message: "expected integer (got string)"}}},
		{"non-finite string", `{"req":"x","ratio":"1e999"}`, []sink.Problem{{Path: "ratio", Message: "expected number (got string)"}}},
		{"padded boolean string", `{"req":"x","enabled":" yes"}`, []sink.Problem{{Path: "enabled", Message: "expected boolean (got string)"}}},
		{"boolean 2", `{"req":"x","enabled":2}`, []sink.Problem{{Path: "enabled", Message: "expected boolean (got number)"}}},
		{"number for string", `{"req":"x","mode":5}`, []sink.Problem{{Path: "mode", Message: "expected string (got number)"}}},
		{"null where not allowed", `{"req":"x","count":null}`, []sink.Problem{{Path: "count", Message: "expected integer (got null)"}}},
		{"null for presence pointer", `{"req":"x","key":null}`, []sink.Problem{{Path: "key", Message: "expected string (got null)"}}},
		{"enum", `{"req":"x","mode":"random"}`, []sink.Problem{{Path: "mode", Message: `must be one of fixed, linear, exponential (got "random")`}}},
		{"int enum", `{"req":"x","tag":5}`, []sink.Problem{{Path: "tag", Message: "must be one of 4, 8, 16 (got 5)"}}},
		{"exclusive min", `{"req":"x","timeout":0}`, []sink.Problem{{Path: "timeout", Message: "must be greater than 0 and at most 86400 (got 0)"}}},
		{"strict numbers", `{"req":"x","backoff":["1"]}`, []sink.Problem{{Path: "backoff[0]", Message: "expected number (got string)"}}},
		{"empty list", `{"req":"x","backoff":[]}`, []sink.Problem{{Path: "backoff", Message: "must not be empty"}}},
		{"duplicate item", `{"req":"x","filters":["a","a"]}`, []sink.Problem{{Path: "filters[1]", Message: `duplicate value "a"`}}},
		{"blank", `{"req":"  "}`, []sink.Problem{{Path: "req", Message: "must not be empty"}}},
		{"pattern", `{"req":"x","items":[{"name":"a1"}]}`, []sink.Problem{{Path: "items[0].name", Message: `must match ^[a-z]+$ (got "a1")`}}},
		{"item required", `{"req":"x","items":[{}]}`, []sink.Problem{{Path: "items[0].name", Message: "required"}}},
		{"too many entries", `{"req":"x","meta":{"a":"1","b":"2","c":"3"}}`, []sink.Problem{{Path: "meta", Message: "must have at most 2 entries (got 3)"}}},
		{"map value type", `{"req":"x","meta":{"a":1}}`, []sink.Problem{{Path: "meta.a", Message: "expected string (got number)"}}},
		{"nested", `{"req":"x","inner":{"ratio":2,"flg":true}}`, []sink.Problem{
			{Path: "inner.ratio", Message: "must be between 0.0 and 1.0 (got 2)"},
			{Path: "inner.flg", Message: `unknown key (did you mean "flag")`},
		}},
		{"schema order", `{"zz":1,"inner":{"ratio":5},"items":[{"name":"B1","weight":0},{"name":"1"}],"count":0}`, []sink.Problem{
			{Path: "count", Message: "must be between 1 and 10000 (got 0)"},
			{Path: "items[0].name", Message: `must match ^[a-z]+$ (got "B1")`},
			{Path: "items[0].weight", Message: "must be between 1 and 100 (got 0)"},
			{Path: "items[1].name", Message: `must match ^[a-z]+$ (got "1")`},
			{Path: "inner.ratio", Message: "must be between 0.0 and 1.0 (got 5)"},
			{Path: "req", Message: "required"},
			{Path: "zz", Message: "unknown key"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, got := decode(t, tt.doc)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode(%s) problems mismatch (-want +got):\n%s", tt.doc, diff)
			}
		})
	}
}

func TestProblemsOrderWithLaterAdds(t *testing.T) {
	tree, _ := jsonx.Parse([]byte(`{"req":"x","count":0}`))
	var p Problems
	Decode(tree, defaults(), "", &p)
	// A cross-field rule found after decoding, at an earlier key and at the
	// same key: both sort into schema order, same-path ones keep add order.
	p.Add("count", "second rule")
	p.Add("type", "first key")
	p.Add("items[0].weight", "later")
	want := []sink.Problem{
		{Path: "type", Message: "first key"},
		{Path: "count", Message: "must be between 1 and 10000 (got 0)"},
		{Path: "count", Message: "second rule"},
		{Path: "items[0].weight", Message: "later"},
	}
	if diff := cmp.Diff(want, p.List()); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
}

type testSink struct {
	Type      string  `json:"type"`
	Directory string  `json:"directory" required:"true" nonblank:"true"`
	Level     int     `json:"level" min:"1" max:"9"`
	Password  *string `json:"password" secret:"true"`
}

func (s *testSink) Validate() error {
	return Validate(s, func(p *Problems) {
		if s.Directory == "/" {
			p.Add("directory", "must not be the root directory")
		}
	})
}

func TestDecodeSink(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  string
		want []sink.Problem
	}{
		{"ok", `{"type":"file","directory":"d"}`, nil},
		{"problems relative to the sink", `{"type":"file","level":0,"dir":"x"}`, []sink.Problem{
			{Path: "directory", Message: "required"},
			{Path: "level", Message: "must be between 1 and 9 (got 0)"},
			{Path: "dir", Message: "unknown key"},
		}},
		{"validator runs", `{"type":"file","directory":"/"}`, []sink.Problem{{Path: "directory", Message: "must not be the root directory"}}},
		{"duplicate key", `{"type":"file","directory":"a","directory":"b"}`, []sink.Problem{{Path: "(root)", Message: `duplicate key "directory"`}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := DecodeSink(json.RawMessage(tt.raw), &testSink{Level: 6})
			var got []sink.Problem
			if err != nil {
				ce, ok := errors.AsType[*sink.ConfigError](err)
				if !ok {
					t.Fatalf("DecodeSink(%s) = %T %v, want *sink.ConfigError", tt.raw, err, err)
				}
				got = ce.Problems
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeSink(%s) mismatch (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	s := &testSink{Type: "file", Directory: "d", Level: 6, Password: ptr("hunter2")}
	want := map[string]any{"type": "file", "directory": "d", "level": int64(6), "password": Mask}
	if diff := cmp.Diff(want, Effective(s)); diff != "" {
		t.Errorf("Effective mismatch (-want +got):\n%s", diff)
	}
	s.Password = nil
	if got := Effective(s)["password"]; got != nil {
		t.Errorf("Effective: unset secret = %v, want nil", got)
	}
}

func TestSchema(t *testing.T) {
	got := Schema(defaults())
	data := jsonx.Marshal(got, jsonx.UTF8)
	var back map[string]any
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	props := back["properties"].(map[string]any)
	checks := []struct {
		path string
		got  any
		want any
	}{
		{"additionalProperties", back["additionalProperties"], false},
		{"required", back["required"], []any{"req"}},
		{"count.type", props["count"].(map[string]any)["type"], "integer"},
		{"count.minimum", props["count"].(map[string]any)["minimum"], 1.0},
		{"count.maximum", props["count"].(map[string]any)["maximum"], 10000.0},
		{"count.default", props["count"].(map[string]any)["default"], 100.0},
		{"mode.enum", props["mode"].(map[string]any)["enum"], []any{"fixed", "linear", "exponential"}},
		{"name.type", props["name"].(map[string]any)["type"], []any{"string", "null"}},
		{"timeout.exclusiveMinimum", props["timeout"].(map[string]any)["exclusiveMinimum"], 0.0},
		{"inner.additionalProperties", props["inner"].(map[string]any)["additionalProperties"], false},
		{"items.items.additionalProperties", props["items"].(map[string]any)["items"].(map[string]any)["additionalProperties"], false},
		{"items.items.weight.default", props["items"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["weight"].(map[string]any)["default"], 1.0},
		{"labels.type", props["labels"].(map[string]any)["type"], []any{"array", "string", "null"}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("schema %s mismatch (-want +got):\n%s", c.path, diff)
		}
	}
	desc, _ := props["count"].(map[string]any)["description"].(string)
	if desc == "" {
		t.Errorf("schema count.description is empty, want the coercion note")
	}
}
