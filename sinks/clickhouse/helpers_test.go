package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/clickhousetest"
	"github.com/nats-sinks/nats-sink/sink"
)

var server clickhousetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	server.Close()
	os.Exit(code)
}

var tableSeq atomic.Int64

// uniqueTable returns a table name no other test uses.
func uniqueTable(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), tableSeq.Add(1))
}

// decode decodes a sink object, failing the test on a problem.
func decode(t testing.TB, doc string) Config {
	t.Helper()
	o, err := Decode(json.RawMessage(doc))
	if err != nil {
		t.Fatalf("Decode(%s): %v", doc, err)
	}
	return configOf(o)
}

// configOf returns the Config behind an Opener from Decode.
func configOf(o sink.Opener) Config {
	if c, ok := o.(Config); ok {
		return c
	}
	panic(fmt.Sprintf("unexpected opener %T", o))
}

// open starts a sink and stops it when the test ends.
func open(t testing.TB, c Config) *Sink {
	t.Helper()
	s, err := New(context.Background(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// sinkJSON renders a sink object for the server at u with extra members.
func sinkJSON(u, table, extra string) string {
	doc := fmt.Sprintf(`{"type":"clickhouse","url":%q,"table":%q`, u, table)
	if extra != "" {
		doc += "," + extra
	}
	return doc + "}"
}

// rows runs a query in JSONEachRow and decodes each row.
func rows(t testing.TB, srv *clickhousetest.Server, sql string) []map[string]any {
	t.Helper()
	out := srv.MustQuery(t, sql+" FORMAT JSONEachRow")
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		res = append(res, m)
	}
	return res
}

// recorder is a reverse proxy in front of a server that records every
// request's decoded query text (the query parameter, else the body).
type recorder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	queries []string
	bodies  []string // INSERT bodies
	inserts int
}

func newRecorder(t testing.TB, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query().Get("query")
		var body string
		if req.Body != nil {
			b, _ := io.ReadAll(req.Body)
			body = string(b)
			req.Body = io.NopCloser(strings.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		if q == "" {
			q = body
		}
		r.mu.Lock()
		r.queries = append(r.queries, q)
		if strings.HasPrefix(q, "INSERT") {
			r.inserts++
			r.bodies = append(r.bodies, body)
		}
		r.mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// matching returns the recorded queries starting with prefix.
func (r *recorder) matching(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.queries {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out
}

func (r *recorder) insertBodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func (r *recorder) insertCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inserts
}
