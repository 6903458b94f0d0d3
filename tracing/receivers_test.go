package tracing_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/nats-sinks/nats-sink/internal/tracingtest"
)

// A span as a receiver decoded it, the same whatever the exporter, in
// tracingtest's form (the runner and e2e tests read spans that way too).
type (
	span  = tracingtest.Span
	event = tracingtest.Event
	link  = tracingtest.Link
)

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
		res := tracingtest.ProtoAttrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, tracingtest.FromProto(s, res))
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
