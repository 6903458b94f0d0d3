package metadata

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestNormaliseLabels(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []string
		want []string
	}{
		{"none", nil, []string{}},
		{"empty string", []string{""}, []string{}},
		{"split, trim, dedupe keeping first", []string{"billing; eu ;billing"}, []string{"billing", "eu"}},
		{"empty items dropped", []string{";;a;; ;b;"}, []string{"a", "b"}},
		{"several values (config array)", []string{"b", "a", "b;c"}, []string{"b", "a", "c"}},
		{"python whitespace trimmed", []string{"\u00a0x\u2003;\x1cy\x1f"}, []string{"x", "y"}},
		{"case-sensitive", []string{"A;a"}, []string{"A", "a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := NormaliseLabels(tt.in...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NormaliseLabels(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if got == nil {
				t.Errorf("NormaliseLabels(%q) = nil, want non-nil", tt.in)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestResolve(t *testing.T) {
	rules := []Rule{
		{Subject: "orders.>", Classification: ptr("confidential")},
		{Subject: "orders.*", Priority: ptr("low"), Labels: ptr([]string{"orders"})},
		{Subject: "orders.null", Priority: ptr(""), Labels: ptr([]string{})},
		{Subject: ">", Priority: ptr("normal")},
	}
	type want struct {
		Priority, Classification string
		Labels                   []string
	}
	for _, tt := range []struct {
		name    string
		r       *Resolver
		subject string
		h       sink.Headers
		want    want
	}{
		{"nil resolver, nothing set", nil, "a", nil, want{Labels: []string{}}},
		{"zero resolver reads default headers", &Resolver{}, "a",
			sink.Headers{"nats-sinks-priority": " high ", "NATS-SINKS-CLASSIFICATION": "secret", "Nats-Sinks-Labels": "x;y;x"},
			want{"high", "secret", []string{"x", "y"}}},
		{"defaults when absent", &Resolver{Priority: Field{Default: "p"}, Classification: Field{Default: "c"},
			Labels: LabelsField{Default: []string{"d"}}}, "a", nil, want{"p", "c", []string{"d"}}},
		{"empty header is null and defaults not applied", &Resolver{Priority: Field{Default: "p"},
			Labels: LabelsField{Default: []string{"d"}}, Rules: rules}, "orders.x",
			sink.Headers{"Nats-Sinks-Priority": "  ", "Nats-Sinks-Labels": " ; "}, want{"", "confidential", []string{}}},
		{"custom header names", &Resolver{Priority: Field{Header: "X-Prio"}, Labels: LabelsField{Header: "X-Tags"}}, "a",
			sink.Headers{"x-prio": "1", "Nats-Sinks-Priority": "ignored", "X-TAGS": "t"}, want{"1", "", []string{"t"}}},
		{"first matching rule that sets the field", &Resolver{Rules: rules, Priority: Field{Default: "p"}}, "orders.new", nil,
			want{"low", "confidential", []string{"orders"}}},
		{"rules skip those not setting the field", &Resolver{Rules: rules}, "orders.a.b", nil,
			want{"normal", "confidential", []string{}}},
		{"explicit null in a rule beats later rules and defaults", &Resolver{Rules: rules[2:], Priority: Field{Default: "p"},
			Labels: LabelsField{Default: []string{"d"}}}, "orders.null", nil, want{"", "", []string{}}},
		{"header wins over rule", &Resolver{Rules: rules}, "orders.new", sink.Headers{"Nats-Sinks-Priority": "urgent"},
			want{"urgent", "confidential", []string{"orders"}}},
		{"no rule matches: default", &Resolver{Rules: rules[:3], Priority: Field{Default: "p"}}, "billing", nil,
			want{"p", "", []string{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got want
			got.Priority, got.Classification, got.Labels = tt.r.Resolve(tt.subject, tt.h)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve(%q, %q) mismatch (-want +got):\n%s", tt.subject, tt.h, diff)
			}
		})
	}
}

func TestResolveCopiesConfiguredLabels(t *testing.T) {
	r := &Resolver{Labels: LabelsField{Default: []string{"a", "b"}}}
	_, _, l := r.Resolve("s", nil)
	l[0] = "changed"
	if r.Labels.Default[0] != "a" {
		t.Errorf("Resolve shares the default labels' backing array: default is now %q", r.Labels.Default)
	}
}
