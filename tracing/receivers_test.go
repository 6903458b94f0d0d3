package tracing_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// A span as a receiver decoded it, the same whatever the exporter.
type span struct {
	Name         string
	Kind         string // "consumer", "producer", "internal", "client", "server"
	TraceID      string
	SpanID       string
	ParentSpanID string // "" = root
	TraceState   string
	Sampled      bool
	Attrs        map[string]any // string, int64, float64 or bool
	Events       []event
	Links        []link
	StatusError  bool
	StatusDesc   string
	Resource     map[string]any
}

type event struct {
	Name  string
	Attrs map[string]any
}

type link struct{ TraceID, SpanID string }

// collector gathers the spans one receiver got, with the request headers
// and paths it saw.
type collector struct {
	mu      sync.Mutex
	spans   []span
	paths   []string
	headers []map[string]string // lower-case names
}

func (c *collector) add(path string, hdr map[string]string, req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, path)
	c.headers = append(c.headers, hdr)
	for _, rs := range req.GetResourceSpans() {
		res := protoAttrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, fromProto(s, res))
			}
		}
	}
}

// Spans returns the spans received so far.
func (c *collector) Spans() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

// byName returns the spans named name.
func byName(spans []span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only span named name.
func one(t *testing.T, spans []span, name string) span {
	t.Helper()
	got := byName(spans, name)
	if len(got) != 1 {
		t.Fatalf("spans named %q: got %d, want 1; all spans: %v", name, len(got), names(spans))
	}
	return got[0]
}

func names(spans []span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}

func fromProto(s *tracepb.Span, res map[string]any) span {
	out := span{
		Name:         s.GetName(),
		Kind:         strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
		TraceID:      hex.EncodeToString(s.GetTraceId()),
		SpanID:       hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
		TraceState:   s.GetTraceState(),
		Sampled:      s.GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_TRACE_FLAGS_MASK) == 1,
		Attrs:        protoAttrs(s.GetAttributes()),
		StatusError:  s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusDesc:   s.GetStatus().GetMessage(),
		Resource:     res,
	}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, event{Name: e.GetName(), Attrs: protoAttrs(e.GetAttributes())})
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
	}
	return out
}

func protoAttrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
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

// httpReceiver is an in-process OTLP/HTTP collector: it decodes protobuf
// ExportTraceServiceRequests on any path. status, when not 0, is returned
// instead (to make exports fail).
type httpReceiver struct {
	collector
	srv    *httptest.Server
	status int
}

func newHTTPReceiver(t *testing.T) *httpReceiver {
	t.Helper()
	r := &httpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the receiver's base URL, without a path.
func (r *httpReceiver) URL() string { return r.srv.URL }

func (r *httpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if r.status != 0 {
		http.Error(w, "refused by test", r.status)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hdr := map[string]string{}
	for k, v := range req.Header {
		hdr[strings.ToLower(k)] = strings.Join(v, ",")
	}
	r.add(req.URL.Path, hdr, &msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// grpcReceiver is an in-process OTLP/gRPC collector.
type grpcReceiver struct {
	collector
	coltracepb.UnimplementedTraceServiceServer
	addr string
}

func newGRPCReceiver(t *testing.T) *grpcReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &grpcReceiver{addr: lis.Addr().String()}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return r
}

// URL is the receiver's endpoint for tracing.endpoint.
func (r *grpcReceiver) URL() string { return "http://" + r.addr }

func (r *grpcReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	hdr := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		hdr[strings.ToLower(k)] = strings.Join(v, ",")
	}
	r.add("", hdr, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// stdoutSpans decodes the stdout exporter's output: one JSON span per line.
func stdoutSpans(t *testing.T, out *bytes.Buffer) []span {
	t.Helper()
	type kv struct {
		Key   string
		Value struct {
			Type  string
			Value any
		}
	}
	type sc struct {
		TraceID, SpanID, TraceFlags, TraceState string
	}
	var spans []span
	sc1 := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc1.Buffer(nil, 1<<20)
	for sc1.Scan() {
		var s struct {
			Name        string
			SpanContext sc
			Parent      sc
			SpanKind    int
			Attributes  []kv
			Events      []struct {
				Name       string
				Attributes []kv
			}
			Links  []struct{ SpanContext sc }
			Status struct {
				Code        string
				Description string
			}
			Resource []kv
		}
		if err := json.Unmarshal(sc1.Bytes(), &s); err != nil {
			t.Fatalf("stdout line is not one JSON span: %v\n%s", err, sc1.Text())
		}
		attrs := func(kvs []kv) map[string]any {
			m := map[string]any{}
			for _, a := range kvs {
				v := a.Value.Value
				if f, ok := v.(float64); ok && a.Value.Type == "INT64" {
					v = int64(f)
				}
				m[a.Key] = v
			}
			return m
		}
		parent := s.Parent.SpanID
		if parent == "0000000000000000" {
			parent = ""
		}
		got := span{
			Name:         s.Name,
			Kind:         [...]string{"unspecified", "internal", "server", "client", "producer", "consumer"}[s.SpanKind],
			TraceID:      s.SpanContext.TraceID,
			SpanID:       s.SpanContext.SpanID,
			ParentSpanID: parent,
			TraceState:   s.SpanContext.TraceState,
			Sampled:      s.SpanContext.TraceFlags == "01",
			Attrs:        attrs(s.Attributes),
			StatusError:  s.Status.Code == "Error",
			StatusDesc:   s.Status.Description,
			Resource:     attrs(s.Resource),
		}
		for _, e := range s.Events {
			got.Events = append(got.Events, event{Name: e.Name, Attrs: attrs(e.Attributes)})
		}
		for _, l := range s.Links {
			got.Links = append(got.Links, link{TraceID: l.SpanContext.TraceID, SpanID: l.SpanContext.SpanID})
		}
		spans = append(spans, got)
	}
	return spans
}
