// Package tracingtest records nats-sink's spans for tests: an in-memory
// Tracer for packages that run the runner or a sink in process, and an
// in-process OTLP/HTTP receiver for tests of the real binary. Both turn
// spans into the same plain Span value, so assertions read alike whichever
// path the spans took.
package tracingtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/nats-sinks/nats-sink/tracing"
)

// A Span is one finished span, reduced to what tests assert on.
type Span struct {
	Name         string
	Kind         string // "consumer", "producer", "internal", "client", "server"
	TraceID      string // 32 lower-case hex digits
	SpanID       string // 16 lower-case hex digits
	ParentSpanID string // "" for a root span
	TraceState   string
	Sampled      bool
	Attrs        map[string]any // values are string, int64, float64 or bool
	Events       []Event
	Links        []Link
	StatusError  bool
	StatusDesc   string
	Resource     map[string]any
}

// An Event is a span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// A Link names a linked span.
type Link struct{ TraceID, SpanID string }

// Traceparent returns the W3C traceparent that names s, as an outgoing
// message carrying s's context would hold it.
func (s Span) Traceparent() string {
	flags := "00"
	if s.Sampled {
		flags = "01"
	}
	return "00-" + s.TraceID + "-" + s.SpanID + "-" + flags
}

// Event returns s's events named name.
func (s Span) Event(name string) []Event {
	var out []Event
	for _, e := range s.Events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// A Recorder holds the spans of a Tracer made by New, in the order they
// ended. Spans are recorded synchronously when they end: no flush needed.
type Recorder struct{ r *tracetest.SpanRecorder }

// New returns a Tracer that samples every trace (sample ratio 1) and records
// its spans in memory. It is shut down when the test ends.
func New(t testing.TB, o tracing.Options) (*tracing.Tracer, *Recorder) {
	t.Helper()
	return NewSampled(t, 1, o)
}

// NewSampled is New with a root sample ratio.
func NewSampled(t testing.TB, ratio float64, o tracing.Options) (*tracing.Tracer, *Recorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewWithProcessor(rec, ratio, o)
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, &Recorder{r: rec}
}

// Spans returns the spans ended so far.
func (r *Recorder) Spans() []Span {
	ended := r.r.Ended()
	out := make([]Span, len(ended))
	for i, s := range ended {
		out[i] = fromSDK(s)
	}
	return out
}

// Started returns how many spans were started, ended or not.
func (r *Recorder) Started() int { return len(r.r.Started()) }

func fromSDK(s sdktrace.ReadOnlySpan) Span {
	sc, parent := s.SpanContext(), s.Parent()
	out := Span{
		Name:        s.Name(),
		Kind:        s.SpanKind().String(),
		TraceID:     sc.TraceID().String(),
		SpanID:      sc.SpanID().String(),
		TraceState:  sc.TraceState().String(),
		Sampled:     sc.IsSampled(),
		Attrs:       sdkAttrs(s.Attributes()),
		StatusError: s.Status().Code == codes.Error,
		StatusDesc:  s.Status().Description,
		Resource:    sdkAttrs(s.Resource().Attributes()),
	}
	if parent.IsValid() {
		out.ParentSpanID = parent.SpanID().String()
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, Event{Name: e.Name, Attrs: sdkAttrs(e.Attributes)})
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
	}
	return out
}

func sdkAttrs(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// FromProto converts a span an OTLP receiver decoded; res is its resource's
// attributes.
func FromProto(s *tracepb.Span, res map[string]any) Span {
	out := Span{
		Name:         s.GetName(),
		Kind:         strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
		TraceID:      hex.EncodeToString(s.GetTraceId()),
		SpanID:       hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
		TraceState:   s.GetTraceState(),
		Sampled:      s.GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_TRACE_FLAGS_MASK) == 1,
		Attrs:        ProtoAttrs(s.GetAttributes()),
		StatusError:  s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusDesc:   s.GetStatus().GetMessage(),
		Resource:     res,
	}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Attrs: ProtoAttrs(e.GetAttributes())})
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	return out
}

// ProtoAttrs converts OTLP attributes to a map.
func ProtoAttrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = v.BoolValue
		default:
			m[kv.GetKey()] = fmt.Sprint(v)
		}
	}
	return m
}

// ByName returns the spans named name, in their order in spans.
func ByName(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// One returns the only span named name, failing the test otherwise.
func One(t testing.TB, spans []Span, name string) Span {
	t.Helper()
	got := ByName(spans, name)
	if len(got) != 1 {
		t.Fatalf("spans named %q: got %d, want 1; all spans: %v", name, len(got), Names(spans))
	}
	return got[0]
}

// Names returns the sorted names of spans, for failure messages.
func Names(spans []Span) []string {
	n := make([]string, len(spans))
	for i, s := range spans {
		n[i] = s.Name
	}
	sort.Strings(n)
	return n
}

// BySeq returns the message span ("process …") of stream sequence seq: the
// span with nats_sink.stream_sequence = seq and kind consumer. The zero Span
// and false when there is none.
func BySeq(spans []Span, seq uint64) (Span, bool) {
	for _, s := range spans {
		if s.Kind == "consumer" && s.Attrs["nats_sink.stream_sequence"] == int64(seq) {
			return s, true
		}
	}
	return Span{}, false
}
