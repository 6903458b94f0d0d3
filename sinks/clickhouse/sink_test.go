package clickhouse

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-sinks/nats-sink/internal/clickhousetest"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		header string
		body   string
		want   class
	}{
		{"18.x row content as 500", 500, "", "Code: 131, e.displayText() = DB::Exception: Too large value for FixedString(2)", classPermanent},
		{"18.x parse error", 500, "", "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: ...", classPermanent},
		{"newer parse error as 400", 400, "27", "Code: 27. DB::Exception: Cannot parse input", classPermanent},
		{"unknown table", 404, "", "Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist., e.what() = DB::Exception", classDestination},
		{"unknown database, header only", 500, "81", "", classDestination},
		{"unknown field: table changed", 500, "", "Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: zz: (at row 1)", classDestination},
		{"other 117 is row content", 500, "117", "Code: 117. DB::Exception: Cannot parse JSON string", classPermanent},
		{"wrong password", 401, "", "Code: 193, e.displayText() = DB::Exception: Wrong password for user sink", classDestination},
		{"authentication failed", 516, "516", "Code: 516. DB::Exception: sink: Authentication failed", classDestination},
		{"readonly", 500, "", "Code: 164, e.displayText() = DB::Exception: Cannot execute query in readonly mode", classDestination},
		{"unknown setting", 404, "", "Code: 115, e.displayText() = DB::Exception: Unknown setting async_insert", classDestination},
		{"too many parts", 500, "252", "Code: 252. DB::Exception: Too many parts", classTemporary},
		{"memory limit", 500, "", "Code: 241, e.displayText() = DB::Exception: Memory limit exceeded", classTemporary},
		{"no code 503", 503, "", "Service Unavailable", classTemporary},
		{"no code 401", 401, "", "", classDestination},
		{"no code 404", 404, "", "<html>not found</html>", classDestination},
		{"no code 500", 500, "", "proxy error", classTemporary},
		{"200 with exception", 200, "", "Code: 999. DB::Exception: Keeper", classTemporary},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("X-ClickHouse-Exception-Code", tt.header)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer ts.Close()
			c := &client{base: ts.URL, http: ts.Client(), auth: "Basic x"}
			_, err := c.do(context.Background(), "insert into `default`.`t`", nil, []byte("{}\n"), "application/x-ndjson", 1024)
			if err == nil {
				t.Fatal("do() = nil error")
			}
			if got := classify(err); got != tt.want {
				t.Errorf("classify(%v) = %v, want %v", err, got, tt.want)
			}
			if strings.Contains(err.Error(), "before:") || strings.Contains(err.Error(), "FixedString") {
				t.Errorf("error %q carries the server's message (which may quote row values)", err)
			}
		})
	}
	if got := classify(fmt.Errorf("x: %w", &tlsVerifyError{})); got != classTemporary {
		t.Errorf("unrelated error class = %v", got)
	}
}

type tlsVerifyError struct{}

func (*tlsVerifyError) Error() string { return "x" }

// fakeNewer is an httptest server with the catalogs of a newer ClickHouse:
// DateTime64, insert_deduplication_token, async_insert and the other
// settings. It records the DDL and each INSERT request.
type fakeNewer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	ddl     []string
	inserts []*http.Request
	bodies  []string
	columns string // system.columns answer
}

func newFakeNewer(t *testing.T, columns string) *fakeNewer {
	return newFake(t, columns, httptest.NewServer)
}

func newFake(t *testing.T, columns string, start func(http.Handler) *httptest.Server) *fakeNewer {
	f := &fakeNewer{columns: columns}
	f.srv = start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		q := r.URL.Query().Get("query")
		body := string(b)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case strings.HasPrefix(q, "INSERT"):
			f.inserts = append(f.inserts, r)
			f.bodies = append(f.bodies, body)
		case strings.HasPrefix(body, "SELECT version()"):
			io.WriteString(w, `{"name":"24.3.2.23"}`+"\n")
		case strings.Contains(body, "system.data_type_families"):
			io.WriteString(w, `{"name":"DateTime64"}`+"\n")
		case strings.Contains(body, "system.settings"):
			for _, n := range []string{"insert_deduplication_token", "async_insert", "input_format_null_as_default", "insert_distributed_sync"} {
				io.WriteString(w, `{"name":"`+n+`"}`+"\n")
			}
		case strings.Contains(body, "system.merge_tree_settings"):
			io.WriteString(w, `{"name":"non_replicated_deduplication_window"}`+"\n")
		case strings.HasPrefix(body, "CREATE TABLE"):
			f.ddl = append(f.ddl, body)
		case strings.Contains(body, "system.tables"):
			io.WriteString(w, `{"engine":"ReplacingMergeTree","engine_full":"ReplacingMergeTree(stream_sequence) ORDER BY order_id SETTINGS index_granularity = 8192","sorting_key":"order_id","partition_key":""}`+"\n")
		case strings.Contains(body, "system.columns"):
			io.WriteString(w, f.columns)
		case body == "SELECT 1":
			io.WriteString(w, "1\n")
		default:
			w.Header().Set("X-ClickHouse-Exception-Code", "62")
			w.WriteHeader(400)
			io.WriteString(w, "Code: 62. DB::Exception: Syntax error")
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// TestNewerServer checks detection against a newer catalog: DateTime64
// DDL with the deduplication window, and the exact INSERT request
// (settings, token, headers, body).
func TestNewerServer(t *testing.T) {
	f := newFakeNewer(t, `{"name":"order_id","type":"Int64","is_in_partition_key":0}
{"name":"placed_at","type":"DateTime64(9, 'UTC')","is_in_partition_key":0}
{"name":"micros","type":"Nullable(DateTime64(6, 'UTC'))","is_in_partition_key":0}
{"name":"ok","type":"Bool","is_in_partition_key":0}
{"name":"day","type":"Nullable(Date32)","is_in_partition_key":0}
{"name":"stream_sequence","type":"UInt64","is_in_partition_key":0}
`)
	c := decode(t, sinkJSON(f.srv.URL, "orders", `"layout":"mapped","auto_create":true,"user":"sink","password":"pw","insert_quorum":2,
		"idempotency":{"strategy":"mapping","columns":["order_id"]},"mapping":[
		{"column":"order_id","path":"/id","type":"bigint","required":true},
		{"column":"placed_at","path":"/at","type":"timestamp","required":true},
		{"column":"micros","path":"/at","type":"timestamp"},
		{"column":"ok","path":"/ok","type":"boolean"},
		{"column":"day","path":"/day","type":"date"}]`))
	s := open(t, c)
	if s.features != (features{version: "24.3.2.23", dateTime64: true, token: true, nonReplicatedWindow: true, asyncInsert: true, nullAsDefault: true, distributedSync: true}) {
		t.Errorf("features = %+v", s.features)
	}
	wantDDL := "CREATE TABLE IF NOT EXISTS `default`.`orders` (`order_id` Int64, `placed_at` DateTime64(9, 'UTC'), `micros` Nullable(DateTime64(9, 'UTC')), " +
		"`ok` Nullable(UInt8), `day` Nullable(Date), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`order_id`) " +
		"SETTINGS non_replicated_deduplication_window = 1000"
	if len(f.ddl) != 1 || f.ddl[0] != wantDDL {
		t.Errorf("DDL = %q\nwant %q", f.ddl, wantDDL)
	}
	batch := []*sink.Envelope{
		envelope("orders.new", 41, `{"id":7,"at":"1925-01-01T00:00:00.123456789Z","ok":true,"day":"1925-01-01"}`),
		envelope("orders.new", 42, `{"id":8,"at":"2262-04-11T23:47:16.854775807Z","ok":false}`),
	}
	res := s.WriteBatch(context.Background(), batch)
	for i, r := range res {
		if r.Outcome != sink.Committed {
			t.Fatalf("result %d = %v %v", i, r.Outcome, r.Err)
		}
	}
	if len(f.inserts) != 1 {
		t.Fatalf("%d INSERT requests, want 1", len(f.inserts))
	}
	req := f.inserts[0]
	query := "INSERT INTO `default`.`orders` (`order_id`, `placed_at`, `micros`, `ok`, `day`, `stream_sequence`) FORMAT JSONEachRow"
	sum := sha256.Sum256([]byte("nats-sink:clickhouse:v1\n" + query + "\n" + "stream-sequence:TYPES:41\n" + "stream-sequence:TYPES:42\n"))
	want := url.Values{
		"query": {query}, "wait_end_of_query": {"1"}, "input_format_skip_unknown_fields": {"0"},
		"input_format_allow_errors_num": {"0"}, "input_format_allow_errors_ratio": {"0"}, "async_insert": {"0"},
		"input_format_null_as_default": {"0"}, "insert_distributed_sync": {"1"}, "insert_deduplicate": {"1"},
		"insert_deduplication_token": {hex.EncodeToString(sum[:])}, "insert_quorum": {"2"}, "insert_quorum_timeout": {"30000"},
	}
	if diff := cmp.Diff(want, req.URL.Query()); diff != "" {
		t.Errorf("INSERT parameters mismatch (-want +got):\n%s", diff)
	}
	if got, want := req.Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("sink:pw")); got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if ct, ua := req.Header.Get("Content-Type"), req.Header.Get("User-Agent"); ct != "application/x-ndjson" || !strings.HasPrefix(ua, "nats-sink/") {
		t.Errorf("Content-Type %q, User-Agent %q", ct, ua)
	}
	wantBody := `{"order_id":7,"placed_at":-1420070399876543211,"micros":-1420070399876544,"ok":true,"day":"1925-01-01","stream_sequence":41}` + "\n" +
		`{"order_id":8,"placed_at":9223372036854775807,"micros":9223372036854775,"ok":false,"day":null,"stream_sequence":42}` + "\n"
	if f.bodies[0] != wantBody {
		t.Errorf("INSERT body =\n%s\nwant\n%s", f.bodies[0], wantBody)
	}
	// A message id key never gets a token: a reused id with new content
	// must not be dropped by the server.
	e := envelope("orders.new", 43, `{"id":9,"at":"2026-01-01T00:00:00Z"}`)
	e.Stream, e.StreamSequence, e.MessageID = "", 0, "m-1"
	if res := s.WriteBatch(context.Background(), []*sink.Envelope{e}); res[0].Outcome != sink.Committed {
		t.Fatalf("message-id row: %v %v", res[0].Outcome, res[0].Err)
	}
	if q := f.inserts[1].URL.Query(); q.Has("insert_deduplication_token") || q.Has("insert_deduplicate") {
		t.Errorf("token sent for a message-id key: %v", q)
	}
	// Out of the DateTime64 range: never sent.
	res = s.WriteBatch(context.Background(), []*sink.Envelope{envelope("orders.new", 44, `{"id":10,"at":"1924-12-31T23:59:59Z"}`)})
	if res[0].Outcome != sink.Permanent || !strings.HasSuffix(res[0].Err.Error(), `mapping column "placed_at" (path "/at"): out of range for ClickHouse DateTime64(9)`) {
		t.Errorf("out-of-range DateTime64: %v %v", res[0].Outcome, res[0].Err)
	}
	if len(f.inserts) != 2 {
		t.Errorf("%d INSERTs, want 2: an out-of-range row reached the server", len(f.inserts))
	}
}

// TestTemporaryStopsLaterInserts: after a temporary failure the batch's
// remaining INSERTs are NotAttempted, earlier ones stay Committed.
func TestTemporaryStopsLaterInserts(t *testing.T) {
	f := newFakeNewer(t, `{"name":"order_id","type":"Int64","is_in_partition_key":0}
{"name":"stream_sequence","type":"UInt64","is_in_partition_key":0}
`)
	max := 2
	c := decode(t, sinkJSON(f.srv.URL, "orders", `"layout":"mapped","idempotency":{"strategy":"mapping","columns":["order_id"]},
		"mapping":[{"column":"order_id","path":"/id","type":"bigint","required":true}]`))
	c.MaxRowsPerInsert = &max
	s := open(t, c)
	var batch []*sink.Envelope
	for i := range 6 {
		batch = append(batch, envelope("orders.new", uint64(i+1), fmt.Sprintf(`{"id":%d}`, i)))
	}
	// The second INSERT fails: rows 0-1 Committed, 2-3 Temporary, 4-5 NotAttempted.
	s.client.http.Transport = failSecondInsert(s.client.http.Transport)
	res := s.WriteBatch(context.Background(), batch)
	want := []sink.Outcome{sink.Committed, sink.Committed, sink.Temporary, sink.Temporary, sink.NotAttempted, sink.NotAttempted}
	for i, r := range res {
		if r.Outcome != want[i] {
			t.Errorf("row %d: %v (%v), want %v", i, r.Outcome, r.Err, want[i])
		}
	}
}

// failSecondInsert answers the second INSERT request with 503.
func failSecondInsert(next http.RoundTripper) http.RoundTripper {
	var mu sync.Mutex
	n := 0
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if strings.HasPrefix(r.URL.Query().Get("query"), "INSERT") {
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			if k == 2 {
				return &http.Response{StatusCode: 503, Body: io.NopCloser(strings.NewReader("unavailable")), Header: http.Header{}, Request: r}, nil
			}
		}
		return next.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Test1816Detection: Debian's 18.16 has no DateTime64, no token and no
// async_insert; the INSERT sends only the settings it has.
func Test1816Detection(t *testing.T) {
	srv := server.Get(t)
	rec := newRecorder(t, srv.URL)
	table := uniqueTable("detect")
	s := open(t, decode(t, sinkJSON(rec.srv.URL, table, `"layout":"mapped","auto_create":true,"mapping":[{"column":"at","path":"/at","type":"timestamp"}]`)))
	if !strings.HasPrefix(s.features.version, "18.16") {
		t.Skipf("server is %s, not 18.16", s.features.version)
	}
	if s.features.dateTime64 || s.features.token || s.features.asyncInsert || s.features.nullAsDefault || !s.features.distributedSync {
		t.Errorf("18.16 features = %+v", s.features)
	}
	ddl := rec.matching("CREATE TABLE")
	if len(ddl) != 1 || !strings.Contains(ddl[0], "`at` Nullable(DateTime('UTC'))") || strings.Contains(ddl[0], "SETTINGS") {
		t.Errorf("DDL = %q", ddl)
	}
	res := s.WriteBatch(context.Background(), []*sink.Envelope{envelope("d.x", 1, `{"at":"2026-05-29T10:11:12Z"}`)})
	if res[0].Outcome != sink.Committed {
		t.Fatalf("write: %v %v", res[0].Outcome, res[0].Err)
	}
}

// TestDestinationErrors: refused credentials, a read-only user and a table
// dropped under the sink are Destination, never dead-lettered.
func TestDestinationErrors(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("dest")
	good := decode(t, sinkJSON(srv.URL, table, `"auto_create":true`))
	s := open(t, good)
	e := func(seq uint64) []*sink.Envelope { return []*sink.Envelope{envelope("dest.x", seq, `{}`)} }

	// Start-up with a wrong password fails as a runtime error (exit 1).
	bad := good
	bad.User, bad.Password = clickhousetest.User, ptr(secret.Value("wrong"))
	if _, err := New(context.Background(), bad, sink.Deps{}); err == nil || errors.As(err, new(*sink.ConfigError)) || classify(err) != classDestination {
		t.Errorf("New with a wrong password: %v (class %v)", err, classify(err))
	}
	for _, tt := range []struct{ name, user, password string }{
		{"wrong password", clickhousetest.User, "wrong"},
		{"read-only user", "reader", "reader"},
	} {
		saved := s.client.auth
		s.client.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(tt.user+":"+tt.password))
		res := s.WriteBatch(context.Background(), e(1))
		if res[0].Outcome != sink.Destination {
			t.Errorf("%s: %v %v, want Destination", tt.name, res[0].Outcome, res[0].Err)
		}
		if tt.name == "wrong password" {
			if err := s.Healthcheck(context.Background()); err == nil || sink.Failed(err).Outcome != sink.Destination {
				t.Errorf("Healthcheck with a wrong password = %v, want a Destination error", err)
			}
		}
		s.client.auth = saved
	}
	if err := s.Healthcheck(context.Background()); err != nil {
		t.Errorf("Healthcheck = %v", err)
	}
	srv.MustQuery(t, "DROP TABLE `"+table+"`")
	res := s.WriteBatch(context.Background(), e(2))
	if res[0].Outcome != sink.Destination || !strings.Contains(res[0].Err.Error(), "code 60") {
		t.Errorf("dropped table: %v %v, want Destination with code 60", res[0].Outcome, res[0].Err)
	}
	// Without auto_create a missing table stops the start (exit 1), and
	// is not a configuration error.
	if _, err := New(context.Background(), decode(t, sinkJSON(srv.URL, table, "")), sink.Deps{}); err == nil ||
		errors.As(err, new(*sink.ConfigError)) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing table: %v", err)
	}
}

// TestRefusedRowIsolated: a FixedString(2) column and one 3-character value
// in a batch of 100: the INSERT's rows get a Shared Permanent result naming
// the code (the runner bisects them), nothing of it is stored, and the
// offending message alone is refused again while the other 99 store.
func TestRefusedRowIsolated(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("fixed")
	srv.MustQuery(t, "CREATE TABLE `"+table+"` (`k` Int64, `code` FixedString(2), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(`stream_sequence`) ORDER BY (`k`)")
	s := open(t, decode(t, sinkJSON(srv.URL, table, `"layout":"mapped","idempotency":{"strategy":"mapping","columns":["k"]},
		"mapping":[{"column":"k","path":"/k","type":"bigint","required":true},{"column":"code","path":"/code","type":"text","required":true}]`)))
	var batch []*sink.Envelope
	for i := range 100 {
		code := "ab"
		if i == 57 {
			code = "abc"
		}
		batch = append(batch, envelope("fixed.x", uint64(i+1), fmt.Sprintf(`{"k":%d,"code":%q}`, i, code)))
	}
	res := s.WriteBatch(context.Background(), batch)
	for i, r := range res {
		if r.Outcome != sink.Permanent || !r.Shared || !strings.Contains(r.Err.Error(), "code 131") {
			t.Fatalf("row %d: %v shared=%v %v, want Shared Permanent with code 131", i, r.Outcome, r.Shared, r.Err)
		}
	}
	if got := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM `"+table+"`")); got != "0" {
		t.Errorf("a refused INSERT stored %s rows", got)
	}
	one := s.WriteBatch(context.Background(), batch[57:58])
	if one[0].Outcome != sink.Permanent {
		t.Errorf("the bad row alone: %v", one[0].Outcome)
	}
	rest := append(append([]*sink.Envelope{}, batch[:57]...), batch[58:]...)
	for i, r := range s.WriteBatch(context.Background(), rest) {
		if r.Outcome != sink.Committed {
			t.Fatalf("good row %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	if got := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM `"+table+"` FINAL")); got != "99" {
		t.Errorf("stored %s rows, want 99", got)
	}
}

// TestSplitting: max_rows_per_insert and max_request_bytes cut INSERTs; a
// single row above max_request_bytes is Permanent alone.
func TestSplitting(t *testing.T) {
	srv := server.Get(t)
	rec := newRecorder(t, srv.URL)
	table := uniqueTable("split")
	c := decode(t, sinkJSON(rec.srv.URL, table, `"auto_create":true,"max_rows_per_insert":10,"max_request_bytes":65536`))
	s := open(t, c)
	var batch []*sink.Envelope
	for i := range 25 {
		batch = append(batch, envelope("split.small", uint64(i+1), `{"i":1}`))
	}
	big := strings.Repeat("x", 30000)
	for i := range 4 {
		batch = append(batch, envelope("split.big", uint64(100+i), `{"s":"`+big+`"}`))
	}
	batch = append(batch, envelope("split.huge", 200, `{"s":"`+strings.Repeat("y", 70000)+`"}`))
	before := rec.insertCount()
	res := s.WriteBatch(context.Background(), batch)
	for i, r := range res[:29] {
		if r.Outcome != sink.Committed {
			t.Fatalf("row %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	if r := res[29]; r.Outcome != sink.Permanent || r.Shared || !strings.Contains(r.Err.Error(), "row exceeds max_request_bytes") {
		t.Errorf("huge row: %v shared=%v %v", r.Outcome, r.Shared, r.Err)
	}
	// Every INSERT holds at most 10 rows and 64 KiB, and together they
	// hold the 29 rows once: 25 small rows need 3 INSERTs, the 4 big ones
	// (~31 KB each) at least 2 more.
	bodies := rec.insertBodies()[before:]
	lines := 0
	for _, b := range bodies {
		n := strings.Count(b, "\n")
		if len(b) > 65536 || n > 10 {
			t.Errorf("an INSERT has %d bytes and %d rows, above the limits", len(b), n)
		}
		lines += n
	}
	if lines != 29 || len(bodies) < 5 {
		t.Errorf("%d INSERTs with %d rows, want at least 5 with 29", len(bodies), lines)
	}
	if got := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM `"+table+"` FINAL")); got != "29" {
		t.Errorf("stored %s rows, want 29", got)
	}
}

// TestStartupChecks: each require_replacing_engine violation is a
// configuration error with the documented text; the checks can be turned
// off.
func TestStartupChecks(t *testing.T) {
	srv := server.Get(t)
	cols := "`stream_name` String, `stream_sequence` UInt64, `subject` String, `message_id` Nullable(String), `priority` Nullable(String), " +
		"`classification` Nullable(String), `labels` Nullable(String), `message_created_at_epoch_ns` Nullable(Int64), " +
		"`jetstream_timestamp_epoch_ns` Nullable(Int64), `received_at_epoch_ns` Int64, `stored_at_epoch_ns` Int64, `payload_json` String, " +
		"`headers_json` String, `metadata_json` String, `mission_metadata_json` String, `security_labels_json` String"
	for _, tt := range []struct {
		name, ddl string
		want      sink.Problem
	}{
		{"engine", "(" + cols + ") ENGINE = MergeTree ORDER BY (stream_name, stream_sequence)",
			sink.Problem{Path: "table", Message: `table "default.%s" has engine MergeTree; the duplicate model needs a *ReplacingMergeTree engine (or set require_replacing_engine: false)`}},
		{"sorting key", "(" + cols + ") ENGINE = ReplacingMergeTree(stream_sequence) ORDER BY (stream_name)",
			sink.Problem{Path: "idempotency.columns", Message: `table "default.%s" is ordered by (stream_name); the idempotency key is (stream_name, stream_sequence)`}},
		{"partition", "(" + cols + ", `day` Date) ENGINE = ReplacingMergeTree(stream_sequence) PARTITION BY day ORDER BY (stream_name, stream_sequence)",
			sink.Problem{Path: "table", Message: `partition key of "default.%s" uses column "day", which is not a key column; duplicates in different partitions never collapse`}},
		{"version", "(" + cols + ", `v` UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY (stream_name, stream_sequence)",
			sink.Problem{Path: "version_column", Message: `table "default.%s" has version column "v"; configured "stream_sequence"`}},
		{"audit type", "(" + strings.Replace(cols, "`subject` String", "`subject` Int64", 1) + ") ENGINE = ReplacingMergeTree(stream_sequence) ORDER BY (stream_name, stream_sequence)",
			sink.Problem{Path: "columns.subject", Message: `column "subject" of table "%s" has type Int64; the audit column needs String`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table := uniqueTable("check")
			srv.MustQuery(t, "CREATE TABLE `"+table+"` "+tt.ddl)
			c := decode(t, sinkJSON(srv.URL, table, ""))
			_, err := New(context.Background(), c, sink.Deps{})
			var ce *sink.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("New = %v, want a *sink.ConfigError", err)
			}
			want := tt.want
			want.Message = fmt.Sprintf(want.Message, table)
			if diff := cmp.Diff([]sink.Problem{want}, ce.Problems); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
			if tt.name != "audit type" {
				c.RequireReplacingEngine = false
				s, err := New(context.Background(), c, sink.Deps{})
				if err != nil {
					t.Fatalf("with require_replacing_engine false: %v", err)
				}
				s.Stop(context.Background())
			}
		})
	}
}

// TestAutoEvolve: 2 of 4 mapped columns present → the other 2 are added as
// Nullable; a second start issues no DDL; a column of another type and a
// missing key column are configuration errors.
func TestAutoEvolve(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("evolve")
	srv.MustQuery(t, "CREATE TABLE `"+table+"` (`order_id` Int64, `amount` Nullable(Decimal(12, 2)), `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(stream_sequence) ORDER BY order_id")
	mappingJSON := `"layout":"mapped","auto_evolve":true,"idempotency":{"strategy":"mapping","columns":["order_id"]},"mapping":[
		{"column":"order_id","path":"/id","type":"bigint","required":true},
		{"column":"amount","path":"/amount","type":"numeric(12,2)"},
		{"column":"placed_at","path":"/at","type":"timestamp","required":true},
		{"column":"tenant","path":"$header:X-Tenant","type":"text"}]`
	rec := newRecorder(t, srv.URL)
	s := open(t, decode(t, sinkJSON(rec.srv.URL, table, mappingJSON)))
	if alters := rec.matching("ALTER"); len(alters) != 2 {
		t.Errorf("first start ran %d ALTERs, want 2: %q", len(alters), alters)
	}
	got := rows(t, srv, "SELECT name, type FROM system.columns WHERE database = 'default' AND table = '"+table+"' AND name IN ('placed_at', 'tenant') ORDER BY name")
	want := []map[string]any{{"name": "placed_at", "type": "Nullable(DateTime('UTC'))"}, {"name": "tenant", "type": "Nullable(String)"}}
	if s.features.dateTime64 {
		want[0]["type"] = "Nullable(DateTime64(9, 'UTC'))"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("added columns mismatch (-want +got):\n%s", diff)
	}
	rec2 := newRecorder(t, srv.URL)
	open(t, decode(t, sinkJSON(rec2.srv.URL, table, mappingJSON)))
	if ddl := append(rec2.matching("ALTER"), rec2.matching("CREATE")...); len(ddl) != 0 {
		t.Errorf("second start issued DDL: %q", ddl)
	}

	// Another type for a mapped column, and a missing key column.
	table2 := uniqueTable("evolve")
	srv.MustQuery(t, "CREATE TABLE `"+table2+"` (`id` Int64, `tenant` Int32, `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(stream_sequence) ORDER BY id")
	_, err := New(context.Background(), decode(t, sinkJSON(srv.URL, table2, mappingJSON)), sink.Deps{})
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New = %v, want a *sink.ConfigError", err)
	}
	wantProblems := []sink.Problem{
		{Path: "idempotency.columns", Message: fmt.Sprintf(`table "default.%s" is ordered by (id); the idempotency key is (order_id)`, table2)},
		{Path: "idempotency.columns[0]", Message: fmt.Sprintf(`key column "order_id" is missing from table "%s"; auto_evolve never adds key columns`, table2)},
		{Path: "mapping[3].type", Message: fmt.Sprintf(`column "tenant" of table "%s" has type Int32, not compatible with mapped type text`, table2)},
	}
	if diff := cmp.Diff(wantProblems, ce.Problems); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	// Without auto_evolve a missing column names the key to set.
	table3 := uniqueTable("evolve")
	srv.MustQuery(t, "CREATE TABLE `"+table3+"` (`order_id` Int64, `stream_sequence` UInt64) ENGINE = ReplacingMergeTree(stream_sequence) ORDER BY order_id")
	_, err = New(context.Background(), decode(t, sinkJSON(srv.URL, table3, strings.Replace(mappingJSON, `"auto_evolve":true,`, "", 1))), sink.Deps{})
	if !errors.As(err, &ce) || len(ce.Problems) != 3 || ce.Problems[0] != (sink.Problem{Path: "mapping[1].column",
		Message: fmt.Sprintf(`column "amount" is missing from table "%s" (set auto_evolve: true to add it)`, table3)}) {
		t.Errorf("missing columns without auto_evolve: %v", err)
	}
}

// TestGzip: compression gzip sends gzip bodies the server accepts.
func TestGzip(t *testing.T) {
	srv := server.Get(t)
	var gz int
	var mu sync.Mutex
	rec := newRecorder(t, srv.URL)
	table := uniqueTable("gzip")
	s := open(t, decode(t, sinkJSON(rec.srv.URL, table, `"auto_create":true,"compression":"gzip"`)))
	next := s.client.http.Transport
	s.client.http.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Header.Get("Content-Encoding") == "gzip" {
			mu.Lock()
			gz++
			mu.Unlock()
		}
		return next.RoundTrip(r)
	})
	var batch []*sink.Envelope
	for i := range 50 {
		batch = append(batch, envelope("gzip.x", uint64(i+1), `{"n":"`+strings.Repeat("z", 100)+`"}`))
	}
	for i, r := range s.WriteBatch(context.Background(), batch) {
		if r.Outcome != sink.Committed {
			t.Fatalf("row %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	if gz != 1 {
		t.Errorf("%d gzip requests, want 1", gz)
	}
	if got := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM `"+table+"` FINAL")); got != "50" {
		t.Errorf("stored %s rows, want 50", got)
	}
}

// TestAuditRow: the audit layout stores exactly the row the SQL sinks
// bind, every column read back as text.
func TestAuditRow(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("audit")
	s := open(t, decode(t, sinkJSON(srv.URL, table, `"auto_create":true`)))
	stored := time.Date(2026, 5, 29, 10, 11, 12, 123456789, time.UTC)
	s.now = func() time.Time { return stored }
	e := envelope("orders.eu", 7, `{"b":"é\u0000","a":[1.50,true,null]}`)
	e.Headers = sink.Headers{"Nats-Msg-Id": "m-7", "X-Tenant": "acme"}
	e.MessageID, e.Priority, e.Labels = "m-7", "high", []string{"a", "b"}
	if r := s.WriteBatch(context.Background(), []*sink.Envelope{e}); r[0].Outcome != sink.Committed {
		t.Fatalf("write: %v %v", r[0].Outcome, r[0].Err)
	}
	want, err := s.model.rows.Values(e, s.model.tables[0].audit, stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := []string{}
	for _, c := range s.model.tables[0].cols {
		sel = append(sel, "toString(`"+c.name+"`) AS `"+c.name+"`")
	}
	got := rows(t, srv, "SELECT "+strings.Join(sel, ", ")+" FROM `"+table+"` FINAL")
	if len(got) != 1 {
		t.Fatalf("%d rows", len(got))
	}
	for _, c := range s.model.tables[0].cols {
		var w any
		switch v := want[c.field].(type) {
		case string:
			w = v
		case int64:
			w = fmt.Sprint(v)
		}
		if got[0][c.name] != w {
			t.Errorf("column %s = %#v, want %#v", c.name, got[0][c.name], w)
		}
	}
}

// TestTokenDedup: where the server has insert_deduplication_token, the same
// INSERT sent twice stores one part.
func TestTokenDedup(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("token")
	s := open(t, decode(t, sinkJSON(srv.URL, table, `"auto_create":true,"layout":"mapped","mapping":[{"column":"n","path":"/n","type":"bigint"}]`)))
	if !s.features.token {
		t.Skipf("server %s has no insert_deduplication_token (a retried INSERT stores a second part, which ReplacingMergeTree collapses)", s.features.version)
	}
	batch := []*sink.Envelope{envelope("token.x", 1, `{"n":1}`), envelope("token.x", 2, `{"n":2}`)}
	for range 2 {
		for _, r := range s.WriteBatch(context.Background(), batch) {
			if r.Outcome != sink.Committed {
				t.Fatal(r.Err)
			}
		}
	}
	if got := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM system.parts WHERE database = 'default' AND table = '"+table+"' AND active")); got != "1" {
		t.Errorf("%s active parts after the same INSERT twice, want 1", got)
	}
}

// fakeMetrics records the sink's instruments by name.
type fakeMetrics struct {
	mu     sync.Mutex
	counts map[string]int
	obs    map[string]int
}

type fakeCounter struct {
	m    *fakeMetrics
	name string
}

func (c fakeCounter) Add(n int)   { c.m.mu.Lock(); c.m.counts[c.name] += n; c.m.mu.Unlock() }
func (c fakeCounter) Set(float64) {}
func (c fakeCounter) Observe(float64) {
	c.m.mu.Lock()
	c.m.obs[c.name]++
	c.m.mu.Unlock()
}

func (m *fakeMetrics) Counter(name, _ string) (sink.Counter, error) { return fakeCounter{m, name}, nil }
func (m *fakeMetrics) Gauge(name, _ string) (sink.Gauge, error)     { return fakeCounter{m, name}, nil }
func (m *fakeMetrics) CounterVec(name, _ string, _ ...string) (sink.CounterVec, error) {
	return fakeVec{m, name}, nil
}

type fakeVec struct {
	m    *fakeMetrics
	name string
}

func (v fakeVec) With(...string) sink.Counter { return fakeCounter{v.m, v.name} }
func (m *fakeMetrics) Histogram(name, _ string, _ []float64) (sink.Histogram, error) {
	return fakeCounter{m, name}, nil
}

func (m *fakeMetrics) get(name string) (count, observations int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name], m.obs[name]
}

// TestMetrics: rows and INSERT durations count only what the server
// answered 200; each failed request counts once under its class.
func TestMetrics(t *testing.T) {
	srv := server.Get(t)
	table := uniqueTable("metrics")
	fm := &fakeMetrics{counts: map[string]int{}, obs: map[string]int{}}
	s, err := New(context.Background(), decode(t, sinkJSON(srv.URL, table, `"auto_create":true`)), sink.Deps{Metrics: fm})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	var batch []*sink.Envelope
	for i := range 7 {
		batch = append(batch, envelope("metrics.x", uint64(i+1), `{}`))
	}
	s.WriteBatch(context.Background(), batch)
	if rows, _ := fm.get("clickhouse_rows_total"); rows != 7 {
		t.Errorf("clickhouse_rows_total = %d, want 7", rows)
	}
	if _, n := fm.get("clickhouse_insert_seconds"); n != 1 {
		t.Errorf("clickhouse_insert_seconds observed %d times, want 1", n)
	}
	srv.MustQuery(t, "DROP TABLE `"+table+"`")
	s.WriteBatch(context.Background(), batch)
	if n, _ := fm.get("clickhouse_errors_destination_total"); n != 1 {
		t.Errorf("clickhouse_errors_destination_total = %d, want 1", n)
	}
	if rows, _ := fm.get("clickhouse_rows_total"); rows != 7 {
		t.Errorf("clickhouse_rows_total = %d after a failed INSERT, want 7", rows)
	}
}

// TestTLS talks to an https endpoint: with its CA in tls.ca_file (and a
// server_name the certificate holds) the sink opens, passes its health
// check and commits a row with Basic authentication; without the CA, or
// with a name the certificate does not hold, Open fails as a Destination
// failure naming the certificate, before anything is written.
func TestTLS(t *testing.T) {
	f := newFake(t, `{"name":"order_id","type":"Int64","is_in_partition_key":0}
{"name":"stream_sequence","type":"UInt64","is_in_partition_key":0}
`, httptest.NewTLSServer)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	mapped := `"layout":"mapped","user":"sink","password":"pw","idempotency":{"strategy":"mapping","columns":["order_id"]},
		"mapping":[{"column":"order_id","path":"/id","type":"bigint","required":true}]`
	for _, tt := range []struct {
		name, tls string
		wantErr   string // "" = opens
	}{
		{"ca file", fmt.Sprintf(`"tls":{"ca_file":%q}`, ca), ""},
		{"ca file and server name", fmt.Sprintf(`"tls":{"ca_file":%q,"server_name":"example.com"}`, ca), ""},
		{"unknown authority", `"tls":{}`, "certificate signed by unknown authority"},
		{"name not in the certificate", fmt.Sprintf(`"tls":{"ca_file":%q,"server_name":"wrong.example"}`, ca), "wrong.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := decode(t, sinkJSON(f.srv.URL, "orders", mapped+","+tt.tls))
			f.mu.Lock()
			before := len(f.inserts)
			f.mu.Unlock()
			s, err := New(context.Background(), c, sink.Deps{})
			if tt.wantErr != "" {
				if err == nil {
					s.Stop(context.Background())
					t.Fatalf("New succeeded, want an error containing %q", tt.wantErr)
				}
				if r := sink.Failed(err); r.Outcome != sink.Destination || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("New error = %v (%v), want a Destination failure containing %q", err, r.Outcome, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer s.Stop(context.Background())
			if err := s.Healthcheck(context.Background()); err != nil {
				t.Fatalf("Healthcheck: %v", err)
			}
			res := s.WriteBatch(context.Background(), []*sink.Envelope{envelope("orders.new", 1, `{"id":1}`)})
			if res[0].Outcome != sink.Committed {
				t.Fatalf("WriteBatch = %v %v", res[0].Outcome, res[0].Err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.inserts) != before+1 {
				t.Fatalf("%d INSERTs, want 1", len(f.inserts)-before)
			}
			req := f.inserts[len(f.inserts)-1]
			if req.TLS == nil {
				t.Error("INSERT did not travel over TLS")
			}
			if got, want := req.Header.Get("Authorization"), "Basic "+base64.StdEncoding.EncodeToString([]byte("sink:pw")); got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
		})
	}
}
