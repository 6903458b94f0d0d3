package segments

import (
	"bytes"
	"context"
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/nats-sinks/nats-sink/sink"
)

const testBucket = "lake-bucket"

// fakeS3 is an in-process S3 server: gofakes3 with its in-memory backend
// behind httptest. A request passes through front first, which may answer
// it itself (a failing or refusing store) by returning true. Every request
// is recorded.
type fakeS3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu    sync.Mutex
	reqs  []*http.Request
	front func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeS3(t testing.TB) *fakeS3 {
	t.Helper()
	st := &fakeS3{backend: s3mem.New()}
	h := gofakes3.New(st.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	st.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.reqs = append(st.reqs, r.Clone(context.Background()))
		front := st.front
		st.mu.Unlock()
		if front != nil && front(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(st.srv.Close)
	if err := st.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	return st
}

func (st *fakeS3) setFront(f func(w http.ResponseWriter, r *http.Request) bool) {
	st.mu.Lock()
	st.front = f
	st.mu.Unlock()
}

// requests returns the recorded requests whose method is m and whose query
// has (or, with "", may lack) the parameter q.
func (st *fakeS3) requests(m, q string) []*http.Request {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*http.Request
	for _, r := range st.reqs {
		if r.Method == m && (q == "" || r.URL.Query().Has(q)) {
			out = append(out, r)
		}
	}
	return out
}

func (st *fakeS3) keys(t testing.TB) []string {
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

func (st *fakeS3) object(t testing.TB, key string) ([]byte, map[string]string) {
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

func s3Answer(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>test answer</Message><RequestId>1</RequestId></Error>`, code)
}

func ptr[T any](v T) *T { return &v }

func testEnv(name string) (string, bool) {
	switch name {
	case "TEST_AWS_KEY_ID":
		return "AKIDTEST", true
	case "TEST_AWS_SECRET":
		return "secret-test-key", true
	}
	return "", false
}

// s3Config aims a segments sink at st, staging under a temp directory.
func (st *fakeS3) config(t *testing.T, format string) Config {
	c := Default()
	c.Target = "s3"
	c.Format = format
	c.Bucket = testBucket
	c.EndpointURL = ptr(st.srv.URL)
	c.AllowHTTPForLocalTesting = true
	c.RegionName = ptr("us-east-1")
	c.CredentialMode = "environment"
	c.AWSAccessKeyIDEnv = ptr("TEST_AWS_KEY_ID")
	c.AWSSecretAccessKeyEnv = ptr("TEST_AWS_SECRET")
	c.StagingDirectory = ptr(filepath.Join(t.TempDir(), "staging"))
	c.RequestTimeoutSeconds = 2
	return c
}

func newS3Sink(t *testing.T, c Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, sink.Deps{Env: testEnv})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func stagingFiles(t *testing.T, c Config) []string {
	t.Helper()
	ents, err := os.ReadDir(*c.StagingDirectory)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestS3Objects writes JSON Lines (plain and gzip) and Parquet segments to
// the store: holds settle Committed only after the upload; the object is
// complete under its final key with the documented headers and metadata,
// sent as a conditional PUT with Content-MD5; staging is empty after.
func TestS3Objects(t *testing.T) {
	for _, tc := range []struct{ format, comp, ext, ctype string }{
		{"jsonl", "none", ".jsonl", "application/x-ndjson"},
		{"jsonl", "gzip", ".jsonl.gz", "application/gzip"},
		{"parquet", "zstd", ".parquet", "application/vnd.apache.parquet"},
	} {
		t.Run(tc.format+"-"+tc.comp, func(t *testing.T) {
			st := newFakeS3(t)
			c := st.config(t, tc.format)
			c.Compression = ptr(tc.comp)
			c.Prefix = ptr("raw")
			s := newS3Sink(t, c)
			if s.MaxHeld() == 0 {
				t.Fatal("MaxHeld() = 0, want held mode for target s3")
			}
			holds := writeHeldBatch(t, s, envs("ORDERS", 1, 40))
			holds = append(holds, writeHeldBatch(t, s, envs("ORDERS", 41, 60))...)
			checkPending(t, holds)
			if got := st.keys(t); len(got) != 0 {
				t.Fatalf("objects before the segment closed: %v", got)
			}
			if err := s.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkSettled(t, holds, sink.Committed)
			keys := st.keys(t)
			if len(keys) != 1 {
				t.Fatalf("objects = %v, want one", keys)
			}
			dir, name := filepath.Split(keys[0])
			if dir != "raw/ORDERS/2026/05/29/10/" || !finalName.MatchString(name) || !strings.HasSuffix(name, tc.ext) ||
				!strings.HasPrefix(name, "00000000000000000001-00000000000000000060-") {
				t.Errorf("key = %s, want raw/ORDERS/2026/05/29/10/<1>-<60>-<id>%s", keys[0], tc.ext)
			}
			body, hdr := st.object(t, keys[0])
			wantMeta := map[string]string{
				"nats-sinks-records":               "60",
				"nats-sinks-first-stream-sequence": "1",
				"nats-sinks-last-stream-sequence":  "60",
				"nats-sinks-segment-id":            name[42:58],
				"nats-sinks-schema":                map[bool]string{true: ParquetSchema, false: jsonlSchema}[tc.format == "parquet"],
			}
			gotMeta := map[string]string{}
			for k, v := range hdr {
				if n, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-meta-"); ok {
					gotMeta[n] = v
				}
			}
			if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
				t.Errorf("user metadata (-want +got):\n%s", diff)
			}
			if got := hdr["Content-Type"]; got != tc.ctype {
				t.Errorf("Content-Type = %q, want %q", got, tc.ctype)
			}
			if got := hdr["Content-Encoding"]; got != "" {
				t.Errorf("Content-Encoding = %q, want none", got)
			}
			puts := st.requests(http.MethodPut, "")
			if len(puts) != 1 || puts[0].Header.Get("If-None-Match") != "*" || puts[0].Header.Get("Content-Md5") == "" {
				t.Errorf("PUTs = %d, want one with If-None-Match: * and Content-MD5", len(puts))
			}
			// The object reads back as a final segment with all 60 records.
			local := filepath.Join(t.TempDir(), "copy")
			if err := os.MkdirAll(local, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(local, name), body, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(local, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Records != 60 || rep.Distinct != 60 || rep.Unreadable != 0 {
				t.Errorf("Verify(copy) = %+v, want 60 distinct readable records", rep)
			}
			if got := stagingFiles(t, c); len(got) != 0 {
				t.Errorf("staging after commit = %v, want empty", got)
			}
		})
	}
}

// TestS3Unavailable answers 503 to the first PUTs: the commit is retried,
// and the hold settles Committed once the store recovers.
func TestS3Unavailable(t *testing.T) {
	st := newFakeS3(t)
	fails := 2
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && fails > 0 {
			fails--
			s3Answer(w, http.StatusServiceUnavailable, "SlowDown")
			return true
		}
		return false
	})
	c := st.config(t, "parquet")
	s := newS3Sink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 10))
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, holds, sink.Committed)
	if n := len(st.requests(http.MethodPut, "")); n != 3 {
		t.Errorf("PUT attempts = %d, want 3 (two refused)", n)
	}
	if got := st.keys(t); len(got) != 1 {
		t.Errorf("objects = %v, want one", got)
	}
}

// TestS3CommitTimeout refuses every upload: after commit_timeout_ms the hold
// settles Temporary (the runner NAKs), the staging file is deleted, and the
// redelivered messages are committed in a later segment.
func TestS3CommitTimeout(t *testing.T) {
	st := newFakeS3(t)
	var refuse sync.Mutex
	refusing := true
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		refuse.Lock()
		defer refuse.Unlock()
		if r.Method == http.MethodPut && refusing {
			s3Answer(w, http.StatusInternalServerError, "InternalError")
			return true
		}
		return false
	})
	c := st.config(t, "jsonl")
	c.CommitTimeoutMS = ptr(1000)
	s := newS3Sink(t, c)
	batch := envs("S", 1, 5)
	holds := writeHeldBatch(t, s, batch)
	s.mu.Lock()
	for _, seg := range s.open {
		seg.mu.Lock()
		s.mu.Unlock()
		s.closeLocked(seg, "records")
		seg.mu.Unlock()
		s.mu.Lock()
	}
	s.mu.Unlock()
	checkSettled(t, holds, sink.Temporary)
	if got := stagingFiles(t, c); len(got) != 0 {
		t.Errorf("staging after the failed commit = %v, want empty", got)
	}
	if got := st.keys(t); len(got) != 0 {
		t.Fatalf("objects = %v, want none", got)
	}
	refuse.Lock()
	refusing = false
	refuse.Unlock()
	again := writeHeldBatch(t, s, batch) // the redelivery
	if again[0] == holds[0] {
		t.Fatal("redelivery joined the failed hold")
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, again, sink.Committed)
	if got := st.keys(t); len(got) != 1 {
		t.Errorf("objects = %v, want one", got)
	}
}

// TestS3LostAnswerThen412 lets the first PUT store the object but answers
// 503 (a lost answer); the retry's conditional PUT gets 412, which means
// this commit's earlier attempt stored it: Committed, one object.
func TestS3LostAnswerThen412(t *testing.T) {
	st := newFakeS3(t)
	h := gofakes3.New(st.backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	lost := 1
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && lost > 0 {
			lost--
			h.ServeHTTP(httptest.NewRecorder(), r)
			s3Answer(w, http.StatusServiceUnavailable, "ServiceUnavailable")
			return true
		}
		return false
	})
	c := st.config(t, "parquet")
	s := newS3Sink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 10))
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, holds, sink.Committed)
	if n := len(st.requests(http.MethodPut, "")); n != 2 {
		t.Errorf("PUT attempts = %d, want 2", n)
	}
	if got := st.keys(t); len(got) != 1 {
		t.Errorf("objects = %v, want one", got)
	}
}

// TestS3Multipart uploads a segment larger than multipart_part_bytes in
// parts, each with Content-MD5, and the object is the segment's bytes.
func TestS3Multipart(t *testing.T) {
	st := newFakeS3(t)
	c := st.config(t, "jsonl")
	c.MultipartPartBytes = 5 << 20
	c.RequestTimeoutSeconds = 60 // 5 MiB parts on a loaded machine
	s := newS3Sink(t, c)
	pad := strings.Repeat("p", 4000)
	var batch []*sink.Envelope
	for i := uint64(1); i <= 1500; i++ {
		e := env("S", i)
		e.Data = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, pad)
		batch = append(batch, e)
	}
	var holds []sink.Hold
	for i := 0; i < len(batch); i += 500 {
		holds = append(holds, writeHeldBatch(t, s, batch[i:i+500])...)
	}
	var want []byte
	s.mu.Lock()
	for _, seg := range s.open {
		want, _ = readAt(seg.fd, 0, seg.size)
	}
	s.mu.Unlock()
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, holds, sink.Committed)
	parts := st.requests(http.MethodPut, "partNumber")
	if n := (len(want) + 5<<20 - 1) / (5 << 20); len(parts) != n || n < 2 {
		t.Errorf("parts = %d, want %d (at least 2) for %d bytes in 5 MiB parts", len(parts), n, len(want))
	}
	for _, p := range parts {
		if p.Header.Get("Content-Md5") == "" {
			t.Errorf("part %s without Content-MD5", p.URL.Query().Get("partNumber"))
		}
	}
	if n := len(st.requests(http.MethodPost, "uploads")); n != 1 {
		t.Errorf("CreateMultipartUpload = %d, want 1", n)
	}
	keys := st.keys(t)
	if len(keys) != 1 {
		t.Fatalf("objects = %v, want one", keys)
	}
	body, _ := st.object(t, keys[0])
	if !bytes.Equal(body, want) {
		t.Errorf("object is %d bytes, not the segment's %d", len(body), len(want))
	}
}

// TestS3Recovery deletes what a dead process left in staging and aborts a
// stale multipart upload of a segment, but not an unrelated one.
func TestS3Recovery(t *testing.T) {
	st := newFakeS3(t)
	c := st.config(t, "parquet")
	c.CommitTimeoutMS = ptr(1000)
	if err := os.MkdirAll(*c.StagingDirectory, 0o700); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(*c.StagingDirectory, ".0123456789abcdef.parquet.open")
	if err := os.WriteFile(left, []byte("PAR1 torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newS3Sink(t, c)
	if got := stagingFiles(t, c); len(got) != 0 {
		t.Errorf("staging after start = %v, want empty", got)
	}
	ours := "S/00000000000000000001-00000000000000000009-0123456789abcdef.parquet"
	for _, key := range []string{ours, "other/upload.bin"} {
		if _, err := s.s3.client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(testBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	s.now = func() time.Time { return time.Now().Add(time.Hour) }
	s.abortStale(t.Context())
	out, err := s.s3.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket)})
	if err != nil {
		t.Fatal(err)
	}
	var left2 []string
	for _, u := range out.Uploads {
		left2 = append(left2, aws.ToString(u.Key))
	}
	if diff := cmp.Diff([]string{"other/upload.bin"}, left2); diff != "" {
		t.Errorf("uploads after abortStale (-want +got):\n%s", diff)
	}
}

// TestS3Healthcheck passes against the bucket and fails as a destination
// error when the bucket is missing.
func TestS3Healthcheck(t *testing.T) {
	st := newFakeS3(t)
	c := st.config(t, "parquet")
	s := newS3Sink(t, c)
	if err := s.Healthcheck(t.Context()); err != nil {
		t.Errorf("Healthcheck = %v", err)
	}
	c.Bucket = "missing-bucket"
	s = newS3Sink(t, c)
	err := s.Healthcheck(t.Context())
	if sink.Failed(err).Outcome != sink.Destination || !strings.Contains(fmt.Sprint(err), "does not exist") {
		t.Errorf("Healthcheck(missing bucket) = %v, want a destination error naming it", err)
	}
}

func TestS3ConfigProblems(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`{"type":"segments","target":"s3"}`, "bucket: required with target s3"},
		{`{"type":"segments","target":"s3","bucket":"b-1","directory":"d"}`, "directory: only allowed with target local"},
		{`{"type":"segments","target":"s3","bucket":"b-1","fsync":true}`, "fsync: only allowed with target local"},
		{`{"type":"segments","directory":"d","bucket":"b-1"}`, "bucket: only allowed with target s3"},
		{`{"type":"segments","directory":"d","multipart_part_bytes":6000000}`, "multipart_part_bytes: only allowed with target s3"},
		{`{"type":"segments","directory":"d","credential_mode":"default_chain"}`, "credential_mode: only allowed with target s3"},
		{`{"type":"segments","target":"s3","bucket":"b-1","endpoint_url":"http://example.com"}`,
			"endpoint_url: must use https (http is allowed only with allow_http_for_local_testing and a loopback host)"},
		{`{"type":"segments","target":"s3","bucket":"b-1","credential_mode":"environment"}`, "aws_access_key_id_env: required with credential_mode environment"},
		{`{"type":"segments","target":"s3","bucket":"b-1","multipart_part_bytes":1}`, "multipart_part_bytes: must be between 5242880 and 536870912 (got 1)"},
		{`{"type":"segments"}`, "directory: required"},
	} {
		got := problems(t, tt.doc)
		found := false
		for _, p := range got {
			found = found || p == tt.want
		}
		if !found {
			t.Errorf("Decode(%s) = %q, want a problem %q", tt.doc, got, tt.want)
		}
	}
	if got := problems(t, `{"type":"segments","target":"s3","bucket":"b-1","max_held_messages":500,"commit_timeout_ms":5000}`); len(got) != 0 {
		t.Errorf("held-mode keys with target s3: %q, want none", got)
	}
}

// TestS3FlushDeadlineCancelsUpload stalls every PUT: Flush returns at its
// deadline, the running upload is cancelled, its holds settle Temporary
// (the runner NAKs them) and staging is empty.
func TestS3FlushDeadlineCancelsUpload(t *testing.T) {
	st := newFakeS3(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server's Close
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut {
			return false
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		s3Answer(w, http.StatusServiceUnavailable, "SlowDown")
		return true
	})
	c := st.config(t, "parquet")
	c.RequestTimeoutSeconds = 60
	s := newS3Sink(t, c)
	holds := writeHeldBatch(t, s, envs("S", 1, 10))
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := s.Flush(ctx); err == nil {
		t.Error("Flush with a stalled store = nil, want the deadline's error")
	}
	checkSettled(t, holds, sink.Temporary)
	if got := stagingFiles(t, c); len(got) != 0 {
		t.Errorf("staging = %v, want empty", got)
	}
	if got := st.keys(t); len(got) != 0 {
		t.Errorf("objects = %v, want none", got)
	}
}
