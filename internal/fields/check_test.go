package fields

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestCheckMatchesDecode: a value that breaks a tag rule gets the problem
// Decode reports for the same value in a document, at the same path, and a
// decoded value passes Check.
func TestCheckMatchesDecode(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string         // a document Decode rejects
		set  func(*sample)  // the same value set in Go
		want []sink.Problem // what both report
	}{
		{"range", `{"req":"x","count":0}`, func(s *sample) { s.Count = 0 },
			[]sink.Problem{{Path: "count", Message: "must be between 1 and 10000 (got 0)"}}},
		{"float range", `{"req":"x","ratio":0.5}`, func(s *sample) { s.Ratio = 0.5 },
			[]sink.Problem{{Path: "ratio", Message: "must be between 1.0 and 10.0 (got 0.5)"}}},
		{"exclusive minimum on a pointer", `{"req":"x","timeout":0}`, func(s *sample) { s.Timeout = ptr(0.0) },
			[]sink.Problem{{Path: "timeout", Message: "must be greater than 0 and at most 86400 (got 0)"}}},
		{"enum", `{"req":"x","mode":"cubic"}`, func(s *sample) { s.Mode = "cubic" },
			[]sink.Problem{{Path: "mode", Message: `must be one of fixed, linear, exponential (got "cubic")`}}},
		{"integer enum", `{"req":"x","tag":5}`, func(s *sample) { s.Tag = 5 },
			[]sink.Problem{{Path: "tag", Message: "must be one of 4, 8, 16 (got 5)"}}},
		{"nonblank", `{"req":" "}`, func(s *sample) { s.Req = " " },
			[]sink.Problem{{Path: "req", Message: "must not be empty"}}},
		{"slice item in a struct", `{"req":"x","items":[{"name":"a","weight":0}]}`,
			func(s *sample) { s.Items = []item{{Name: "a", Weight: 0}} },
			[]sink.Problem{{Path: "items[0].weight", Message: "must be between 1 and 100 (got 0)"}}},
		{"pattern", `{"req":"x","items":[{"name":"a1"}]}`, func(s *sample) { s.Items = []item{{Name: "a1", Weight: 1}} },
			[]sink.Problem{{Path: "items[0].name", Message: `must match ^[a-z]+$ (got "a1")`}}},
		{"unique", `{"req":"x","filters":["a","a"]}`, func(s *sample) { s.Filters = []string{"a", "a"} },
			[]sink.Problem{{Path: "filters[1]", Message: `duplicate value "a"`}}},
		{"min items", `{"req":"x","backoff":[]}`, func(s *sample) { s.Backoff = &[]float64{} },
			[]sink.Problem{{Path: "backoff", Message: "must not be empty"}}},
		{"item range", `{"req":"x","backoff":[11]}`, func(s *sample) { s.Backoff = &[]float64{11} },
			[]sink.Problem{{Path: "backoff[0]", Message: "must be greater than 0 and at most 10 (got 11)"}}},
		{"map entries", `{"req":"x","meta":{"a":"1","b":"2","c":"3"}}`, func(s *sample) { s.Meta = map[string]string{"a": "1", "b": "2", "c": "3"} },
			[]sink.Problem{{Path: "meta", Message: "must have at most 2 entries (got 3)"}}},
		{"nested struct", `{"req":"x","inner":{"ratio":2}}`, func(s *sample) { s.Inner.Ratio = 2 },
			[]sink.Problem{{Path: "inner.ratio", Message: "must be between 0.0 and 1.0 (got 2)"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, decoded := decode(t, tt.doc)
			if diff := cmp.Diff(tt.want, decoded); diff != "" {
				t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.doc, diff)
			}
			s := defaults()
			s.Req = "x"
			tt.set(s)
			var p Problems
			Check(s, "", &p)
			if diff := cmp.Diff(tt.want, p.List()); diff != "" {
				t.Errorf("Check mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckPassesDecoded: whatever Decode accepted, Check accepts, even
// where Decode normalised the value or the key was null.
func TestCheckPassesDecoded(t *testing.T) {
	doc := `{"req":" x ","count":"5","level":" debug ","name":"  ","labels":"a;b","filters":null,
		"items":[{"name":" B "}],"backoff":[1,2],"meta":{"k":"v"},"secret":"s","key":"k"}`
	s, probs := decode(t, doc)
	if len(probs) > 0 {
		t.Fatalf("Decode(%s): %v", doc, probs)
	}
	var p Problems
	Check(s, "", &p)
	if p.Len() > 0 {
		t.Errorf("Check of a decoded value: %v", p.List())
	}
}

func TestCheckSkipsNullAndBlankNull(t *testing.T) {
	type c struct {
		Name    *string `json:"name" blanknull:"true" pattern:"^[a-z]+$"`
		Timeout *int    `json:"timeout" min:"1"`
	}
	var p Problems
	Check(&c{Name: ptr("  ")}, "", &p)
	if p.Len() > 0 {
		t.Errorf("Check: %v, want none", p.List())
	}
}

func TestValidateSkipsRulesAfterTagProblems(t *testing.T) {
	ran := false
	rules := func(p *Problems) { ran = true; p.Add("req", "cross-key problem") }
	s := defaults()
	s.Req, s.Count = "x", 0
	err := Validate(s, rules)
	if ran {
		t.Error("rules ran although a tag rule failed")
	}
	if err == nil || err.Error() != "count: must be between 1 and 10000 (got 0)" {
		t.Errorf("Validate = %v", err)
	}
	s.Count = 1
	err = Validate(s, rules)
	if !ran || err == nil || err.Error() != "req: cross-key problem" {
		t.Errorf("Validate = %v (rules ran: %v), want the cross-key problem", err, ran)
	}
	s.Req = "y"
	if err := Validate(s, nil); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
}

type connBlock struct {
	URL  string `json:"url"`
	URLs string `json:"urls"`
	Name string `json:"name" min:"1"`
}

type withAfter struct {
	connBlock
	Stream   string `json:"stream" after:"urls" nonblank:"true"`
	Consumer string `json:"consumer" after:"stream" nonblank:"true"`
}

// TestAfterOrdersProblems: keys tagged after:"k" sort right behind k, so a
// struct embedding a block of shared keys keeps its table's order.
func TestAfterOrdersProblems(t *testing.T) {
	tree, err := jsonx.Parse([]byte(`{"x":1,"name":"","consumer":"","stream":"","url":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var p Problems
	Decode(tree, &withAfter{}, "nats", &p)
	var got []string
	for _, pr := range p.List() {
		got = append(got, pr.Path)
	}
	want := []string{"nats.url", "nats.stream", "nats.consumer", "nats.x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problem order (-want +got):\n%s", diff)
	}
}
