package httpsink

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestGoldenBody sends the docs/formats.md#file-records message and compares the body
// with testdata/envelope_body.json: the docs/http.md file record (record package
// golden) with the docs/nats-sink.md changes (schema, ","-joined labels,
// idempotency_key), compact utf8, no newline.
func TestGoldenBody(t *testing.T) {
	ep := newEndpoint(t, nil)
	s, _ := open(t, ep.config())
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})
	if diff := cmp.Diff([]res{{Outcome: sink.Committed}}, summarize(rs)); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	want, err := os.ReadFile("testdata/envelope_body.json")
	if err != nil {
		t.Fatal(err)
	}
	reqs := ep.requests()
	if len(reqs) != 1 {
		t.Fatalf("endpoint received %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if !bytes.Equal(got.Body, want) {
		t.Errorf("body differs from the golden (-want +got):\n%s", cmp.Diff(string(want), string(got.Body)))
	}

	// The same document built from the record package's parts, so a
	// change of the metadata document shows up here as well.
	e := shapestest.Golden()
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := record.FileRecord(e, p, true, shapestest.Stored)
	for i, m := range doc {
		switch m.Key {
		case "schema":
			doc[i].Value = Schema
		case "labels":
			doc[i].Value = "billing,eu"
		}
	}
	doc = append(doc, jsonx.Member{Key: "idempotency_key", Value: "stream-sequence:ORDERS:42"})
	if rebuilt := jsonx.Marshal(doc, jsonx.UTF8); !bytes.Equal(rebuilt, got.Body) {
		t.Errorf("body differs from the record package's document (-want +got):\n%s", cmp.Diff(string(rebuilt), string(got.Body)))
	}

	if got.Method != "POST" || got.Path != "/ingest" {
		t.Errorf("request %s %s, want POST /ingest", got.Method, got.Path)
	}
	for name, want := range map[string]string{
		"Accept":          "application/json",
		"Content-Type":    "application/json",
		"User-Agent":      "nats-sinks-http/0.4",
		"Idempotency-Key": "stream-sequence:ORDERS:42",
		"Traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Tracestate":      "",
		"Baggage":         "",
	} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
}

func TestBodyOptions(t *testing.T) {
	keys := func(body []byte) []string {
		v, err := jsonx.Parse(body)
		if err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		return sortedKeys(toStrings(ks))
	}
	for _, tt := range []struct {
		name   string
		modify func(*Config)
		check  func(t *testing.T, body []byte)
	}{
		{"no optional keys", func(c *Config) {
			c.IncludeMetadata, c.IncludeMissionMetadata, c.IncludeSecurityLabels, c.IncludeCustody = false, false, false, false
		}, func(t *testing.T, body []byte) {
			want := []string{"classification", "consumer", "consumer_sequence", "idempotency_key", "labels", "labels_list",
				"message_id", "payload", "payload_info", "priority", "schema", "schema_version", "stream", "stream_sequence", "subject"}
			if diff := cmp.Diff(want, keys(body)); diff != "" {
				t.Errorf("body keys (-want +got):\n%s", diff)
			}
		}},
		{"payload body", func(c *Config) { c.BodyFormat = "payload" }, func(t *testing.T, body []byte) {
			if want := `{"amount":42.5,"note":"café","order_id":"O-1001"}`; string(body) != want {
				t.Errorf("body = %s, want %s", body, want)
			}
		}},
		{"text envelope payload", func(c *Config) { c.BodyFormat, c.PayloadMode = "payload", string(record.TextEnvelope) }, func(t *testing.T, body []byte) {
			if !strings.HasPrefix(string(body), `{"_nats_sinks":{"payload_encoding":"utf-8"`) {
				t.Errorf("body = %s, want a text envelope", body)
			}
		}},
		{"idempotency disabled", func(c *Config) { c.Idempotency.Enabled, c.Idempotency.Required = false, false }, func(t *testing.T, body []byte) {
			if !bytes.Contains(body, []byte(`"idempotency_key":null`)) {
				t.Errorf("body %s, want idempotency_key null", body)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, nil)
			c := ep.config()
			tt.modify(&c)
			s, _ := open(t, c)
			if rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()}); rs[0].Outcome != sink.Committed {
				t.Fatalf("result %v (%v), want committed", rs[0].Outcome, rs[0].Err)
			}
			tt.check(t, ep.requests()[0].Body)
		})
	}
}

func toStrings(ks []string) map[string]string {
	m := map[string]string{}
	for _, k := range ks {
		m[k] = ""
	}
	return m
}

func TestHeadersAndMethod(t *testing.T) {
	ep := newEndpoint(t, nil)
	c := ep.config()
	c.Method = "PUT"
	c.UserAgent = "custom/1"
	c.Headers = map[string]string{"X-Tenant": "acme"}
	c.HeadersEnv = map[string]string{"Authorization": "HTTP_SINK_TOKEN"}
	env := func(name string) (string, bool) {
		return map[string]string{"HTTP_SINK_TOKEN": "Bearer t0k"}[name], name == "HTTP_SINK_TOKEN"
	}
	c.Idempotency.Header = "X-Dedup"
	s, _ := openWith(t, c, sink.Deps{Env: env})
	e := intake.Build(intake.Message{Subject: "a.b", Reply: "$JS.ACK.S.c.1.9.9.1780048800123456000.0", Data: []byte(`1`),
		Header: map[string][]string{"Tracestate": {"k=v"}, "BAGGAGE": {"u=1"}, "traceparent": {"00-x"}}}, nil, shapestest.Received)
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
		t.Fatalf("result %v (%v)", rs[0].Outcome, rs[0].Err)
	}
	r := ep.requests()[0]
	if r.Method != "PUT" {
		t.Errorf("method %s, want PUT", r.Method)
	}
	for name, want := range map[string]string{
		"User-Agent": "custom/1", "X-Tenant": "acme", "Authorization": "Bearer t0k",
		"X-Dedup": "stream-sequence:S:9", "Idempotency-Key": "",
		"Traceparent": "00-x", "Tracestate": "k=v", "Baggage": "u=1",
	} {
		if v := r.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
}

func TestIdempotencyStrategies(t *testing.T) {
	withSeq := func() *sink.Envelope { return shapestest.Envelope("ORDERS", 42) }
	msgID := func() *sink.Envelope {
		return intake.Build(intake.Message{Subject: "a.b", Data: []byte(`{"k":1}`), Header: map[string][]string{"Nats-Msg-Id": {"m-1"}}}, nil, shapestest.Received)
	}
	bare := func() *sink.Envelope {
		return intake.Build(intake.Message{Subject: "a.b", Data: []byte(`{"k":1}`)}, nil, shapestest.Received)
	}
	omitted := func() *sink.Envelope {
		e := bare()
		e.Data = nil
		e.Payload = sink.PayloadPresence{Omitted: true, OmittedReason: "headers_only", OriginalSize: 7}
		return e
	}
	const sha = "payload-sha256:a.b:a0da1fce57d0e4f9f0ae4e4cbe040d34dcc046255c6c8d18e97f55aaed0655f0"
	for _, tt := range []struct {
		name     string
		strategy string
		required bool
		e        *sink.Envelope
		want     res
		header   string // "" = no header
	}{
		{"core key stream sequence", "idempotency_key", true, withSeq(), res{Outcome: sink.Committed}, "stream-sequence:ORDERS:42"},
		{"core key message id", "idempotency_key", true, msgID(), res{Outcome: sink.Committed}, "message-id:m-1"},
		{"core key payload hash", "idempotency_key", false, bare(), res{Outcome: sink.Committed}, sha},
		{"core key unavailable", "idempotency_key", false, omitted(), res{Outcome: sink.Permanent, ErrorType: sink.ValidationError,
			Err: "http sink (stream seq 0): payload-sha256 idempotency fallback is unavailable because the original payload bytes were omitted"}, ""},
		{"stream_sequence", "stream_sequence", true, withSeq(), res{Outcome: sink.Committed}, "stream-sequence:ORDERS:42"},
		{"stream_sequence missing, required", "stream_sequence", true, msgID(), res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError,
			Err: "http sink (stream seq 0): stream_sequence idempotency strategy requires JetStream stream and sequence metadata"}, ""},
		{"stream_sequence missing, optional", "stream_sequence", false, msgID(), res{Outcome: sink.Committed}, ""},
		{"message_id", "message_id", true, msgID(), res{Outcome: sink.Committed}, "message-id:m-1"},
		{"message_id missing, required", "message_id", true, withSeq(), res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError,
			Err: "http sink (stream seq 42): message_id idempotency strategy requires a message id"}, ""},
		{"message_id missing, optional", "message_id", false, withSeq(), res{Outcome: sink.Committed}, ""},
		{"payload_sha256", "payload_sha256", true, bare(), res{Outcome: sink.Committed}, sha},
		{"payload_sha256 omitted payload (Q17)", "payload_sha256", false, omitted(), res{Outcome: sink.Permanent, ErrorType: sink.ValidationError,
			Err: "http sink (stream seq 0): payload_sha256 idempotency key is unavailable because the original payload bytes were omitted"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, nil)
			c := ep.config()
			c.Idempotency.Strategy, c.Idempotency.Required = tt.strategy, tt.required
			s, _ := open(t, c)
			got := summarize(s.WriteBatch(t.Context(), []*sink.Envelope{tt.e}))
			if diff := cmp.Diff([]res{tt.want}, got); diff != "" {
				t.Fatalf("results (-want +got):\n%s", diff)
			}
			reqs := ep.requests()
			if tt.want.Outcome != sink.Committed {
				if len(reqs) != 0 {
					t.Errorf("a rejected message sent %d requests, want 0", len(reqs))
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			vals := reqs[0].Header.Values("Idempotency-Key")
			wantVals := []string{tt.header}
			if tt.header == "" {
				wantVals = nil
			}
			if diff := cmp.Diff(wantVals, vals); diff != "" {
				t.Errorf("Idempotency-Key (-want +got):\n%s", diff)
			}
			var wantBody any = tt.header
			if tt.header == "" {
				wantBody = nil
			}
			doc, _ := jsonx.Parse(reqs[0].Body)
			if got := doc.(map[string]any)["idempotency_key"]; got != wantBody {
				t.Errorf("body idempotency_key = %v, want %v", got, wantBody)
			}
		})
	}
}

func TestStatusClasses(t *testing.T) {
	for _, tt := range []struct {
		code int
		want res
	}{
		{200, res{Outcome: sink.Committed}},
		{201, res{Outcome: sink.Committed}},
		{202, res{Outcome: sink.Committed}},
		{204, res{Outcome: sink.Committed}},
		{203, res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 203"}},
		{302, res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 302"}},
		{400, res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 400"}},
		{422, res{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 422"}},
		{401, res{Outcome: sink.Destination, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 401"}},
		{403, res{Outcome: sink.Destination, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 403"}},
		{404, res{Outcome: sink.Destination, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 404"}},
		{407, res{Outcome: sink.Destination, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 407"}},
		{408, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 408"}},
		{425, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 425"}},
		{429, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 429"}},
		{500, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 500"}},
		{501, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 501"}},
		{503, res{Outcome: sink.Temporary, Err: "http sink (stream seq 1): HTTP sink returned non-success HTTP status 503"}},
	} {
		t.Run(fmt.Sprint(tt.code), func(t *testing.T) {
			ep := newEndpoint(t, status(tt.code))
			s, sl := open(t, ep.config())
			got := summarize(s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1)}))
			if diff := cmp.Diff([]res{tt.want}, got); diff != "" {
				t.Errorf("status %d (-want +got):\n%s", tt.code, diff)
			}
			if n := len(ep.requests()); n != 1 {
				t.Errorf("%d requests with max_retries 0, want 1", n)
			}
			if d := sl.Delays(); len(d) != 0 {
				t.Errorf("slept %v with max_retries 0", d)
			}
		})
	}
}

func TestConfiguredStatuses(t *testing.T) {
	ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, n int) { w.WriteHeader([]int{299, 418, 200}[n%3]) })
	c := ep.config()
	c.SuccessStatuses = []int{299}
	c.RetryStatuses = []int{418}
	c.Concurrency = 1
	s, _ := open(t, c)
	b := shapestest.Batch("S", 3)
	got := summarize(s.WriteBatch(t.Context(), b[:1]))
	got = append(got, summarize(s.WriteBatch(t.Context(), b[1:2]))...)
	got = append(got, summarize(s.WriteBatch(t.Context(), b[2:]))...)
	want := []res{
		{Outcome: sink.Committed},
		{Outcome: sink.Temporary, Err: "http sink (stream seq 2): HTTP sink returned non-success HTTP status 418"},
		{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: "http sink (stream seq 3): HTTP sink returned non-success HTTP status 200"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var target atomic.Int32
	ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/elsewhere" {
			target.Add(1)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	s, _ := open(t, ep.config())
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1)})
	if rs[0].Outcome != sink.Permanent || !strings.Contains(rs[0].Err.Error(), "status 307") {
		t.Errorf("redirect result = %v (%v), want permanent status 307", rs[0].Outcome, rs[0].Err)
	}
	if target.Load() != 0 {
		t.Errorf("the redirect target received %d requests, want 0", target.Load())
	}
}

func TestMaxRequestBytes(t *testing.T) {
	ep := newEndpoint(t, nil)
	c := ep.config()
	c.BodyFormat = "payload"
	c.MaxRequestBytes = 128
	s, _ := open(t, c)
	fits := intake.Build(intake.Message{Subject: "a", Reply: "$JS.ACK.S.c.1.1.1.1780048800123456000.0",
		Data: []byte(`"` + strings.Repeat("x", 126) + `"`)}, nil, shapestest.Received)
	over := intake.Build(intake.Message{Subject: "a", Reply: "$JS.ACK.S.c.1.2.2.1780048800123456000.0",
		Data: []byte(`"` + strings.Repeat("x", 127) + `"`)}, nil, shapestest.Received)
	got := summarize(s.WriteBatch(t.Context(), []*sink.Envelope{fits, over}))
	want := []res{
		{Outcome: sink.Committed},
		{Outcome: sink.Permanent, ErrorType: sink.SerializationError, Err: "http sink (stream seq 2): HTTP request body exceeds max_request_bytes"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := len(ep.requests()); n != 1 {
		t.Errorf("%d requests, want 1 (the oversized body is never sent)", n)
	}
}

func TestJSONOnlyRejects(t *testing.T) {
	ep := newEndpoint(t, nil)
	c := ep.config()
	c.PayloadMode = string(record.JSONOnly)
	s, _ := open(t, c)
	e := intake.Build(intake.Message{Subject: "a.b", Reply: "$JS.ACK.S.c.1.1.1.1780048800123456000.0", Data: []byte("not json")}, nil, shapestest.Received)
	got := summarize(s.WriteBatch(t.Context(), []*sink.Envelope{e}))
	want := []res{{Outcome: sink.Permanent, ErrorType: sink.SerializationError, Err: "http sink (stream seq 1): message payload for subject 'a.b' is not valid JSON"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResponseLimit(t *testing.T) {
	for _, tt := range []struct {
		limit, size int
		want        sink.Outcome
	}{
		{10, 10, sink.Committed},
		{10, 11, sink.Temporary},
		{0, 0, sink.Committed},
		{0, 1, sink.Temporary},
		{65536, 1 << 20, sink.Temporary},
	} {
		t.Run(fmt.Sprintf("limit %d size %d", tt.limit, tt.size), func(t *testing.T) {
			ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Write(bytes.Repeat([]byte("r"), tt.size))
			})
			c := ep.config()
			c.MaxResponseBytes = tt.limit
			s, _ := open(t, c)
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1)})
			if rs[0].Outcome != tt.want {
				t.Errorf("outcome %v (%v), want %v", rs[0].Outcome, rs[0].Err, tt.want)
			}
			if tt.want == sink.Temporary && !strings.Contains(rs[0].Err.Error(), "HTTP response body exceeds max_response_bytes") {
				t.Errorf("error %q, want it to name max_response_bytes", rs[0].Err)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	for _, tt := range []struct {
		name      string
		codes     []int // response per request; the last repeats
		retry     Retry
		want      sink.Outcome
		requests  int
		wantSleep []time.Duration
	}{
		{"recovers after two 503", []int{503, 503, 200},
			Retry{MaxRetries: 3, BackoffMS: 10, MaxBackoffMS: 1000, BackoffMode: "exponential", BackoffMultiplier: 2, Jitter: "none"},
			sink.Committed, 3, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		{"budget exhausted", []int{503},
			Retry{MaxRetries: 3, BackoffMS: 10, MaxBackoffMS: 25, BackoffMode: "exponential", BackoffMultiplier: 2, Jitter: "none"},
			sink.Temporary, 4, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}},
		{"5xx outside retry_statuses is retried too", []int{501, 200},
			Retry{MaxRetries: 1, BackoffMS: 10, MaxBackoffMS: 25, BackoffMode: "fixed", BackoffMultiplier: 1, Jitter: "none"},
			sink.Committed, 2, []time.Duration{10 * time.Millisecond}},
		{"permanent is not retried", []int{400},
			Retry{MaxRetries: 5, BackoffMS: 10, MaxBackoffMS: 25, BackoffMode: "fixed", BackoffMultiplier: 1, Jitter: "none"},
			sink.Permanent, 1, nil},
		{"destination is not retried", []int{401},
			Retry{MaxRetries: 5, BackoffMS: 10, MaxBackoffMS: 25, BackoffMode: "fixed", BackoffMultiplier: 1, Jitter: "none"},
			sink.Destination, 1, nil},
		{"equal jitter", []int{429, 200},
			Retry{MaxRetries: 1, BackoffMS: 100, MaxBackoffMS: 1000, BackoffMode: "linear", BackoffMultiplier: 1, Jitter: "equal"},
			sink.Committed, 2, []time.Duration{75 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				w.WriteHeader(tt.codes[min(n, len(tt.codes)-1)])
			})
			c := ep.config()
			c.Retry = tt.retry
			s, sl := open(t, c)
			rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1)})
			if rs[0].Outcome != tt.want {
				t.Errorf("outcome %v (%v), want %v", rs[0].Outcome, rs[0].Err, tt.want)
			}
			reqs := ep.requests()
			if len(reqs) != tt.requests {
				t.Errorf("%d requests, want %d", len(reqs), tt.requests)
			}
			for i, r := range reqs {
				if k := r.Header.Get("Idempotency-Key"); k != "stream-sequence:S:1" {
					t.Errorf("attempt %d idempotency key %q, want the same key on every attempt", i+1, k)
				}
			}
			if diff := cmp.Diff(tt.wantSleep, sl.Delays()); diff != "" {
				t.Errorf("backoff delays (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryConnectionError(t *testing.T) {
	ep := newEndpoint(t, nil)
	c := ep.config()
	ep.srv.Close() // nothing listens any more: connection refused
	c.Retry.MaxRetries = 2
	s, sl := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1)})
	if rs[0].Outcome != sink.Temporary {
		t.Errorf("outcome %v (%v), want temporary", rs[0].Outcome, rs[0].Err)
	}
	if n := len(sl.Delays()); n != 2 {
		t.Errorf("%d retries of a refused connection, want 2", n)
	}
}

func TestRetryWaitHonoursCancel(t *testing.T) {
	ep := newEndpoint(t, status(503))
	c := ep.config()
	c.Retry = Retry{MaxRetries: 10, BackoffMS: 60000, MaxBackoffMS: 60000, BackoffMode: "fixed", BackoffMultiplier: 2, Jitter: "none"}
	s, err := New(t.Context(), c, sink.Deps{}) // the real sleep
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	ep.handle = func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(503)
		cancel() // the sink now waits 60 s for its retry, unless it honours ctx
	}
	rs := s.WriteBatch(ctx, []*sink.Envelope{shapestest.Envelope("S", 1), shapestest.Envelope("S", 2)})
	want := []sink.Outcome{sink.Temporary, sink.NotAttempted}
	if got := []sink.Outcome{rs[0].Outcome, rs[1].Outcome}; !cmp.Equal(want, got) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	if n := len(ep.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestBackoff(t *testing.T) {
	r := Retry{BackoffMS: 250, MaxBackoffMS: 5000, BackoffMode: "exponential", BackoffMultiplier: 2, Jitter: "none"}
	for _, tt := range []struct {
		name    string
		attempt int
		r       func(Retry) Retry
		u       float64
		want    time.Duration
	}{
		{"exponential 1", 1, nil, 0, 250 * time.Millisecond},
		{"exponential 3", 3, nil, 0, time.Second},
		{"exponential capped", 10, nil, 0, 5 * time.Second},
		{"exponential overflow", 5000, nil, 0, 5 * time.Second},
		{"attempt below 1", 0, nil, 0, 250 * time.Millisecond},
		{"linear", 3, func(r Retry) Retry { r.BackoffMode = "linear"; return r }, 0, 750 * time.Millisecond},
		{"fixed", 7, func(r Retry) Retry { r.BackoffMode = "fixed"; return r }, 0, 250 * time.Millisecond},
		{"full jitter", 2, func(r Retry) Retry { r.Jitter = "full"; return r }, 0.25, 125 * time.Millisecond},
		{"equal jitter", 2, func(r Retry) Retry { r.Jitter = "equal"; return r }, 0.5, 375 * time.Millisecond},
		{"zero base", 4, func(r Retry) Retry { r.BackoffMS = 0; return r }, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rr := r
			if tt.r != nil {
				rr = tt.r(r)
			}
			if got := backoff(tt.attempt, rr, tt.u); got != tt.want {
				t.Errorf("backoff(%d, %+v, %v) = %v, want %v", tt.attempt, rr, tt.u, got, tt.want)
			}
		})
	}
}

// stall is a handler that blocks until the request's context ends (the
// client gave up) or release is closed, and records both.
type stall struct {
	release  chan struct{}
	arrived  chan struct{} // one send per request
	mu       sync.Mutex
	inflight int
	gone     int // requests whose client went away
}

func newStall() *stall {
	return &stall{release: make(chan struct{}), arrived: make(chan struct{}, 1024)}
}

func (st *stall) handle(w http.ResponseWriter, r *http.Request, _ int) {
	st.mu.Lock()
	st.inflight++
	st.mu.Unlock()
	st.arrived <- struct{}{}
	select {
	case <-r.Context().Done():
		st.mu.Lock()
		st.gone++
		st.mu.Unlock()
	case <-st.release:
	}
	st.mu.Lock()
	st.inflight--
	st.mu.Unlock()
}

// settled waits until no request is in the handler any more.
func (st *stall) settled(t *testing.T) (gone int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.mu.Lock()
		in, g := st.inflight, st.gone
		st.mu.Unlock()
		if in == 0 {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in the handler: the sink leaked them", in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRequestTimeout(t *testing.T) {
	st := newStall()
	ep := newEndpoint(t, st.handle)
	c := ep.config()
	c.RequestTimeoutSeconds = 0.05
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 1), shapestest.Envelope("S", 2)})
	if rs[0].Outcome != sink.Temporary || !strings.Contains(rs[0].Err.Error(), "deadline exceeded") {
		t.Errorf("stalled request = %v (%v), want temporary with a deadline error", rs[0].Outcome, rs[0].Err)
	}
	if rs[1].Outcome != sink.NotAttempted {
		t.Errorf("message after the timeout = %v, want not attempted", rs[1].Outcome)
	}
	if gone := st.settled(t); gone != 1 {
		t.Errorf("%d requests saw the client go away, want 1", gone)
	}
}

func TestCancellation(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			st := newStall()
			ep := newEndpoint(t, st.handle)
			c := ep.config()
			c.Concurrency = conc
			c.Retry.MaxRetries = 3
			s, _ := open(t, c)
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-st.arrived // a request is in flight: now shut down
				cancel()
			}()
			rs := s.WriteBatch(ctx, shapestest.Batch("S", 8))
			for i, r := range rs {
				if r.Outcome != sink.Temporary && r.Outcome != sink.NotAttempted {
					t.Errorf("message %d = %v (%v), want temporary or not attempted", i, r.Outcome, r.Err)
				}
			}
			if rs[0].Outcome != sink.Temporary {
				t.Errorf("in-flight message = %v, want temporary", rs[0].Outcome)
			}
			gone := st.settled(t)
			if n := len(ep.requests()); gone != n {
				t.Errorf("%d requests sent, %d of them abandoned by the client; want all abandoned", n, gone)
			}
			if n := len(ep.requests()); n > conc {
				t.Errorf("%d requests sent, want at most concurrency %d", n, conc)
			}
		})
	}
}

func TestSequentialStopsAtFirstTemporary(t *testing.T) {
	for _, tt := range []struct {
		name     string
		codes    map[int]int // request index → status; others 200
		want     []sink.Outcome
		requests int
	}{
		{"temporary stops", map[int]int{2: 503}, []sink.Outcome{sink.Committed, sink.Committed, sink.Temporary, sink.NotAttempted, sink.NotAttempted}, 3},
		{"destination stops", map[int]int{1: 403}, []sink.Outcome{sink.Committed, sink.Destination, sink.NotAttempted, sink.NotAttempted, sink.NotAttempted}, 2},
		{"permanent continues", map[int]int{1: 400, 3: 422}, []sink.Outcome{sink.Committed, sink.Permanent, sink.Committed, sink.Permanent, sink.Committed}, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if code, ok := tt.codes[n]; ok {
					w.WriteHeader(code)
				}
			})
			s, _ := open(t, ep.config())
			rs := s.WriteBatch(t.Context(), shapestest.Batch("S", 5))
			got := make([]sink.Outcome, len(rs))
			for i, r := range rs {
				got[i] = r.Outcome
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			reqs := ep.requests()
			if len(reqs) != tt.requests {
				t.Fatalf("%d requests, want %d", len(reqs), tt.requests)
			}
			for i, r := range reqs {
				if k, want := r.Header.Get("Idempotency-Key"), fmt.Sprintf("stream-sequence:S:%d", i+1); k != want {
					t.Errorf("request %d key %q, want %q (in order)", i, k, want)
				}
			}
		})
	}
}

func TestConcurrentPerMessageResults(t *testing.T) {
	const conc = 4
	var (
		mu       sync.Mutex
		inflight int
		peak     int
		full     = make(chan struct{})
	)
	ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		mu.Lock()
		inflight++
		if inflight > peak {
			peak = inflight
		}
		if peak == conc {
			select {
			case <-full:
			default:
				close(full)
			}
		}
		mu.Unlock()
		// Hold every request until conc are in flight at once; a sink
		// that sent one at a time would stall here until the fallback.
		select {
		case <-full:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		var seq int
		fmt.Sscanf(r.Header.Get("Idempotency-Key"), "stream-sequence:S:%d", &seq)
		switch {
		case seq == 3:
			w.WriteHeader(503)
		case seq%2 == 0:
			w.WriteHeader(400)
		}
	})
	c := ep.config()
	c.Concurrency = conc
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("S", 9))
	want := []sink.Outcome{sink.Committed, sink.Permanent, sink.Temporary, sink.Permanent, sink.Committed,
		sink.Permanent, sink.Committed, sink.Permanent, sink.Committed}
	got := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		got[i] = r.Outcome
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if n := len(ep.requests()); n != 9 {
		t.Errorf("%d requests, want 9 (one temporary failure does not stop the others)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != conc {
		t.Errorf("peak requests in flight = %d, want %d", peak, conc)
	}
}

func TestConcurrentDestinationStopsNewRequests(t *testing.T) {
	ep := newEndpoint(t, status(401))
	c := ep.config()
	c.Concurrency = 2
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("S", 50))
	dest := 0
	for i, r := range rs {
		switch r.Outcome {
		case sink.Destination:
			dest++
		case sink.NotAttempted:
		default:
			t.Errorf("message %d = %v, want destination or not attempted", i, r.Outcome)
		}
	}
	if n := len(ep.requests()); dest != n || n == 0 || n == 50 {
		t.Errorf("%d requests, %d destination results; want equal, and fewer than 50", n, dest)
	}
}

func TestMetrics(t *testing.T) {
	m, err := telemetry.NewMetrics(nil, "nats_sink")
	if err != nil {
		t.Fatal(err)
	}
	ep := newEndpoint(t, nil)
	c := ep.config()
	s, _ := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
	s.WriteBatch(t.Context(), shapestest.Batch("S", 3))
	if got := s.reqSeconds.(*telemetry.Histogram).Summary().Count; got != 3 {
		t.Errorf("http_request_seconds count = %v, want 3", got)
	}
}
