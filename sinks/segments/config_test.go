package segments

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, doc string) []string {
	t.Helper()
	_, err := Decode(json.RawMessage(doc))
	if err == nil {
		return nil
	}
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Decode(%s) = %v, want a *sink.ConfigError", doc, err)
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Path+": "+p.Message)
	}
	return out
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want []string
	}{
		{`{"type":"segments","directory":"d"}`, nil},
		{`{"type":"segments"}`, []string{"directory: required"}},
		{`{"type":"segments","directory":"d","partition":"{stream}/{x}"}`, []string{`partition: unknown placeholder "{x}"`}},
		{`{"type":"segments","directory":"d","partition":"{stream"}`, []string{"partition: unbalanced brace"}},
		{`{"type":"segments","directory":"d","partition":"a}"}`, []string{"partition: unbalanced brace"}},
		{`{"type":"segments","directory":"d","partition":"a//b"}`, []string{`partition: must not contain "//"`}},
		{`{"type":"segments","directory":"d","partition":"/a"}`, []string{`partition: must not start or end with "/"`}},
		{`{"type":"segments","directory":"d","partition":"a/../b"}`, []string{`partition: level ".." is not allowed`}},
		{`{"type":"segments","directory":"d","partition":"a b"}`, []string{`partition: character ' ' is not allowed; literal text is [A-Za-z0-9_.=-]`}},
		{`{"type":"segments","directory":"d","compression_level":3}`, []string{"compression_level: must be null with compression none"}},
		{`{"type":"segments","directory":"d","compression":"gzip","compression_level":12}`, []string{"compression_level: must be between 1 and 9 with compression gzip (got 12)"}},
		{`{"type":"segments","directory":"d","max_bytes":10}`, []string{"max_bytes: must be between 1048576 and 4294967296 (got 10)"}},
		{`{"type":"segments","directory":"d","prefix":"a/../b"}`, []string{`prefix: segment ".." is not allowed`}},
	} {
		got := problems(t, tt.doc)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.doc, diff)
		}
	}
}

func TestTemplateRender(t *testing.T) {
	tm, err := parseTemplate("src={stream}/dt={yyyy}-{mm}-{dd}/hour={hh}/{subject}")
	if err != nil {
		t.Fatal(err)
	}
	e := &sink.Envelope{Stream: "ORDERS", Subject: "../x y"}
	got := tm.render(e, time.Date(2026, 5, 29, 10, 0, 0, 250e6, time.UTC))
	if want := "src=ORDERS/dt=2026-05-29/hour=10/x_y"; got != want {
		t.Errorf("render = %q, want %q", got, want)
	}
}

func TestLocationTooLong(t *testing.T) {
	c := testConfig(t)
	long := strings.Repeat("a", 127)
	p := strings.Repeat(long+"/", 7) + long
	c.Prefix = &p
	c.Partition = "{subject}"
	s := newSink(t, c)
	e := env("S", 1)
	e.Subject = strings.Repeat("s", 119)
	r := s.WriteBatch(t.Context(), []*sink.Envelope{e})
	if r[0].Outcome != sink.Permanent {
		t.Errorf("outcome = %v, want permanent for a location over 1024 bytes", r[0].Outcome)
	}
	_ = filepath.Join
}
