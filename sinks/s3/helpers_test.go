package s3sink

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/nats-sinks/nats-sink/internal/backoff/backofftest"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

const testBucket = "nats-archive"

// request is one request the fake store received.
type request struct {
	Method string
	Path   string
	Header http.Header
}

// store is an in-process S3 server: gofakes3 with its in-memory backend
// behind httptest. Requests pass through front first, which may answer
// them itself (a store that lacks a feature, fails, or stalls) by returning
// true. Every request is recorded.
type store struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu    sync.Mutex
	reqs  []request
	front func(w http.ResponseWriter, r *http.Request) bool
}

func newStore(t testing.TB) *store { t.Helper(); return startStore(t, false) }

// newTLSStore is newStore over HTTPS, the production path (the SDK then
// sends UNSIGNED-PAYLOAD); clients created after it trust its certificate.
func newTLSStore(t testing.TB) *store { t.Helper(); return startStore(t, true) }

func startStore(t testing.TB, tls bool) *store {
	t.Helper()
	st := &store{backend: s3mem.New()}
	faker := gofakes3.New(st.backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	h := faker.Server()
	st.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.reqs = append(st.reqs, request{r.Method, r.URL.Path, r.Header.Clone()})
		front := st.front
		st.mu.Unlock()
		if front != nil && front(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	if tls {
		st.srv.StartTLS()
		trustServer(t, st.srv)
	} else {
		st.srv.Start()
	}
	t.Cleanup(st.srv.Close)
	if err := st.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	return st
}

// setFront installs (or with nil removes) the request interceptor.
func (st *store) setFront(f func(w http.ResponseWriter, r *http.Request) bool) {
	st.mu.Lock()
	st.front = f
	st.mu.Unlock()
}

func (st *store) requests() []request {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]request(nil), st.reqs...)
}

// count returns how many requests had method and, if cond is not "", the
// header If-None-Match equal to cond.
func (st *store) count(method, cond string) int {
	n := 0
	for _, r := range st.requests() {
		if r.Method == method && (cond == "" || r.Header.Get("If-None-Match") == cond) {
			n++
		}
	}
	return n
}

// keys lists every object key in the bucket, sorted.
func (st *store) keys(t testing.TB) []string {
	t.Helper()
	list, err := st.backend.ListBucket(testBucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Contents {
		out = append(out, c.Key)
	}
	sort.Strings(out)
	return out
}

// object returns the body and stored headers of key.
func (st *store) object(t testing.TB, key string) ([]byte, map[string]string) {
	t.Helper()
	o, err := st.backend.GetObject(testBucket, key, nil)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer o.Contents.Close()
	b, err := io.ReadAll(o.Contents)
	if err != nil {
		t.Fatal(err)
	}
	return b, o.Metadata
}

// userMeta extracts the x-amz-meta-* entries of stored headers, lower-cased.
func userMeta(h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if name, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-meta-"); ok {
			out[name] = v
		}
	}
	return out
}

// testEnv holds the credentials of credential_mode environment.
func testEnv(name string) (string, bool) {
	switch name {
	case "TEST_AWS_KEY_ID":
		return "AKIDTEST", true
	case "TEST_AWS_SECRET":
		return "secret-test-key", true
	}
	return "", false
}

// config returns the default configuration aimed at the store, with
// credentials from the test environment (never the default chain, which
// would probe the instance-metadata endpoint).
func (st *store) config() Config {
	c := Default()
	c.Bucket = testBucket
	c.EndpointURL = ptr(st.srv.URL)
	c.AllowHTTPForLocalTesting = true
	c.RegionName = ptr("us-east-1")
	c.CredentialMode = "environment"
	c.AWSAccessKeyIDEnv = ptr("TEST_AWS_KEY_ID")
	c.AWSSecretAccessKeyEnv = ptr("TEST_AWS_SECRET")
	return c
}

func ptr[T any](v T) *T { return &v }

// open starts a sink on c with a fixed clock and recorded, instant retry
// delays, and stops it when the test ends. Its environment is testEnv.
func open(t testing.TB, c Config) (*Sink, *backofftest.Recorder) {
	t.Helper()
	return openWith(t, c, sink.Deps{})
}

// openWith is open with deps; a nil deps.Env means testEnv.
func openWith(t testing.TB, c Config, deps sink.Deps) (*Sink, *backofftest.Recorder) {
	t.Helper()
	if deps.Env == nil {
		deps.Env = testEnv
	}
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sl := &backofftest.Recorder{}
	s.sleep = sl.Sleep
	s.jitter = func() float64 { return 0.5 }
	s.now = func() time.Time { return shapestest.Stored }
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s, sl
}

// res is a comparable summary of a sink.Result.
type res struct {
	Outcome   sink.Outcome
	ErrorType string
}

func summarize(rs []sink.Result) []res {
	out := make([]res, len(rs))
	for i, r := range rs {
		out[i] = res{Outcome: r.Outcome, ErrorType: r.ErrorType}
	}
	return out
}

// s3Error answers like S3 does: status code and an XML error document.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>test answer</Message><RequestId>1</RequestId></Error>`, code)
}

// trustServer makes the SDK clients created after it trust srv's TLS
// certificate, through AWS_CA_BUNDLE as an operator would.
func trustServer(t testing.TB, srv *httptest.Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", path)
}
