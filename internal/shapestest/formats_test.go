package shapestest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	kafkasink "github.com/nats-sinks/nats-sink/sinks/kafka"
	natssink "github.com/nats-sinks/nats-sink/sinks/nats"
	s3sink "github.com/nats-sinks/nats-sink/sinks/s3"
	"github.com/nats-sinks/nats-sink/sqlconfig"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// repoRoot is the module root, relative to this package.
var repoRoot = filepath.Join("..", "..")

// formatsDoc is the page whose examples TestFormatsDoc keeps true.
var formatsDoc = filepath.Join(repoRoot, "docs", "formats.md")

// An example is one fenced block of docs/formats.md introduced by a line
// "<!-- example: ID -->". text is the block's content, every line followed
// by "\n"; start and end are its byte offsets in the page.
type example struct {
	id         string
	text       string
	start, end int
}

var exampleMarker = regexp.MustCompile(`^<!-- example: ([a-z0-9-]+) -->$`)

// parseExamples returns the examples of doc in page order. The marker must
// be followed directly by an opening fence; the block ends at the next line
// that is exactly "```".
func parseExamples(doc []byte) ([]example, error) {
	var out []example
	lines := bytes.SplitAfter(doc, []byte("\n"))
	off := 0
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(string(lines[i]), "\n")

		off += len(lines[i])
		m := exampleMarker.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "<!-- example") {
				return nil, fmt.Errorf("line %d: malformed example marker %q", i+1, line)
			}
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(string(lines[i+1]), "```") {
			return nil, fmt.Errorf("line %d: example %s is not followed by a fenced block", i+1, m[1])
		}
		i++
		off += len(lines[i])
		start := off
		for {
			i++
			if i >= len(lines) {
				return nil, fmt.Errorf("example %s: fenced block not closed", m[1])
			}
			if strings.TrimRight(string(lines[i]), "\n") == "```" {
				out = append(out, example{id: m[1], text: string(doc[start:off]), start: start, end: off})
				off += len(lines[i])
				break
			}
			off += len(lines[i])
		}
	}
	return out, nil
}

// shown is how bytes b appear in a fenced block: a block can only hold
// whole lines, so output without a final newline is shown with one. The
// page says which shapes end in a newline.
func shown(b []byte) string {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return string(b)
	}
	return string(b) + "\n"
}

// TestFormatsDoc checks that every example of docs/formats.md is, byte for
// byte, what the code produces for the input the page states, with the
// fixed times the page states, and that every generator below has its
// example on the page. NATS_SINK_UPDATE=1 rewrites the examples from the
// code (then read the diff: the prose around them may need changing too).
func TestFormatsDoc(t *testing.T) {
	doc, err := os.ReadFile(formatsDoc)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := parseExamples(doc)
	if err != nil {
		t.Fatalf("%s: %v", formatsDoc, err)
	}
	gens := generators()
	seen := map[string]bool{}
	var updated []byte
	last := 0
	for _, ex := range examples {
		if seen[ex.id] {
			t.Errorf("%s: example %s appears twice", formatsDoc, ex.id)
			continue
		}
		seen[ex.id] = true
		gen, ok := gens[ex.id]
		if !ok {
			t.Errorf("%s: example %s has no generator in this test", formatsDoc, ex.id)
			continue
		}
		want := shown(gen(t))
		updated = append(append(updated, doc[last:ex.start]...), want...)
		last = ex.end
		if ex.text != want {
			t.Errorf("%s: example %s differs from what the code produces (-doc +code):\n%s", formatsDoc, ex.id, cmp.Diff(ex.text, want))
		}
	}
	updated = append(updated, doc[last:]...)
	for _, id := range slices.Sorted(mapsKeys(gens)) {
		if !seen[id] {
			t.Errorf("%s: no example %s (add <!-- example: %s --> before its block)", formatsDoc, id, id)
		}
	}
	if os.Getenv("NATS_SINK_UPDATE") != "" && !bytes.Equal(doc, updated) {
		if err := os.WriteFile(formatsDoc, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the examples of %s", formatsDoc)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestParseExamples checks the example parser, so that TestFormatsDoc
// cannot pass by finding no examples.
func TestParseExamples(t *testing.T) {
	doc := "text\n<!-- example: a-1 -->\n```json\n{\"x\":1}\n\n```\nmore\n<!-- example: b -->\n```\nline\n```\n"
	got, err := parseExamples([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a-1:{\"x\":1}\n\n", "b:line\n"}
	var have []string
	for _, ex := range got {
		have = append(have, ex.id+":"+ex.text)
		if doc[ex.start:ex.end] != ex.text {
			t.Errorf("offsets of %s do not hold its text", ex.id)
		}
	}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("parseExamples mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"<!-- example: x -->\ntext\n",
		"<!-- example: x -->\n```\nunclosed\n",
		"<!-- example:x-->\n```\n```\n",
	} {
		if _, err := parseExamples([]byte(bad)); err == nil {
			t.Errorf("parseExamples(%q) = nil error, want one", bad)
		}
	}
	real, err := os.ReadFile(formatsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := parseExamples(real); err != nil || len(ex) < 20 {
		t.Errorf("%s: %d examples, %v; want at least 20", formatsDoc, len(ex), err)
	}
}

// TestNoSpecPaths checks that no page, source file, script or fixture of
// the repository points into the developers' spec directory beside it: a
// user has only this repository.
func TestNoSpecPaths(t *testing.T) {
	// Built from parts so that this file does not match itself.
	forbidden := []string{"../" + "shared", "shared" + "/spec"}
	checked := 0
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md", ".go", ".txtar", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for _, f := range forbidden {
			if i := bytes.Index(b, []byte(f)); i >= 0 {
				line := bytes.Count(b[:i], []byte("\n")) + 1
				t.Errorf("%s:%d mentions %q", path, line, f)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Errorf("checked %d files; the walk did not reach the repository", checked)
	}
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file exists and, for a link into a page, the heading anchor exists there
// (GitHub's anchors). Code comments and other pages point at headings such
// as docs/delivery.md#retries-and-back-off, so renaming one must show here.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		seen := map[string]int{}
		for _, line := range proseLines(string(b)) {
			m := headingLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			slug := slugify(m[1])
			if n := seen[slug]; n > 0 {
				a[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				a[slug] = true
			}
			seen[slug]++
		}
		anchors[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range proseLines(string(b)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s: link %q: %v", page, target, err)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s: link %q: no heading with anchor #%s in %s", page, target, anchor, path)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("found %d relative links; the link pattern no longer matches", links)
	}
}

var (
	headingLine = regexp.MustCompile(`^#{1,6} +(.+?) *$`)
	mdLink      = regexp.MustCompile(`\]\(([^()\s]+)\)`)
)

// proseLines returns the lines of a markdown page outside fenced blocks.
func proseLines(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, letters, digits, '-' and
// '_' kept, spaces turned into '-', everything else dropped.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"Retries and back-off":                          "retries-and-back-off",
		"`max_in_flight_batches` is honoured":           "max_in_flight_batches-is-honoured",
		"`sink (type \"s3\")`":                          "sink-type-s3",
		"Decisions where nats-sink differs, or chooses": "decisions-where-nats-sink-differs-or-chooses",
		"1. The consumer exists (`bind_only`), no DLQ":  "1-the-consumer-exists-bind_only-no-dlq",
	} {
		if got := slugify(in); got != want {
			t.Errorf("slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestObservabilityMetrics checks that docs/observability.md names every
// core metric (every name of the snapshot document), so a metric added to
// the code cannot stay undocumented.
func TestObservabilityMetrics(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := jsonx.Parse(m.Snapshot(snapshotAt))
	if err != nil {
		t.Fatal(err)
	}
	names := 0
	for _, group := range []string{"counters", "gauges", "observations"} {
		for name := range tree.(map[string]any)[group].(map[string]any) {
			names++
			if !bytes.Contains(page, []byte("`"+name+"`")) {
				t.Errorf("docs/observability.md does not name the metric %s (%s)", name, group)
			}
		}
	}
	if names < 60 {
		t.Errorf("the snapshot has %d metric names; expected the full core set", names)
	}
}

// The inputs the page states besides the golden message.
var (
	// failedAt is when the dead letter of the golden message is built.
	failedAt = time.Date(2026, 5, 29, 10, 0, 1, 234567890, time.UTC)
	// snapshotAt is the metrics snapshot's generation time.
	snapshotAt = time.Date(2026, 5, 29, 10, 0, 5, 0, time.UTC)
)

// textMessage, bytesMessage and headersOnlyMessage are the other inputs of
// the file-record examples.
func textMessage() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "notes.daily",
		Reply:   "$JS.ACK.NOTES.notes-file.1.3.3.1780048800000000000.0",
		Data:    []byte("hello world"),
	}, nil, shapestest.Received)
}

func bytesMessage() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "blobs.raw",
		Reply:   "$JS.ACK.BLOBS.blobs-file.1.5.5.1780048800000000000.0",
		Data:    []byte{0xff, 0x00, 0x01},
	}, nil, shapestest.Received)
}

func headersOnlyMessage() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "audit.login",
		Reply:   "$JS.ACK.AUDIT.audit-file.2.9.4.1780048799000000000.0",
		Header: map[string][]string{
			"Nats-Msg-Size":             {"2048"},
			"Nats-Sinks-Classification": {"restricted"},
		},
	}, nil, shapestest.Received)
}

// fileRecord is what the file sink writes for e: the record, pretty or
// compact, and one newline (sinks/file uses the same three calls).
func fileRecord(t *testing.T, e *sink.Envelope, metadata, pretty bool) []byte {
	t.Helper()
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	doc := record.FileRecord(e, p, metadata, shapestest.Stored)
	if pretty {
		return append(jsonx.MarshalPretty(doc, jsonx.UTF8), '\n')
	}
	return append(jsonx.Marshal(doc, jsonx.UTF8), '\n')
}

func payloadValue(t *testing.T, data []byte) []byte {
	t.Helper()
	p, err := record.NormalisePayload(&sink.Envelope{Subject: "s", Data: data}, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	return jsonx.Marshal(p.Value, jsonx.UTF8)
}

// fixture reads a golden file of another package; that package's own test
// proves the file is what its sink writes (at the same fixed times).
func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// headerLines renders a header map one "Name: value" line per value,
// sorted by name (header order carries no meaning).
func headerLines(h map[string][]string) []byte {
	var b bytes.Buffer
	for _, name := range slices.Sorted(mapsKeys(h)) {
		for _, v := range h[name] {
			fmt.Fprintf(&b, "%s: %s\n", name, v)
		}
	}
	return b.Bytes()
}

func sqlModel(t *testing.T, d sqlmodel.Dialect) *sqlmodel.Model {
	t.Helper()
	var m *sqlmodel.Model
	var err error
	if d == sqlmodel.Oracle {
		s := sqlmodel.DefaultShared[sqlconfig.MergeRoute](d)
		m, err = sqlmodel.Compile(&s, d, sqlmodel.Options{Mode: sqlmodel.Merge, AutoCreate: true})
	} else {
		s := sqlmodel.DefaultShared[sqlconfig.UpsertRoute](d)
		m, err = sqlmodel.Compile(&s, d, sqlmodel.Options{Mode: sqlmodel.Upsert, AutoCreate: true})
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sqlRow renders the bound values of the golden message's row, one column
// per line, NULL for SQL NULL, text and integers as they are bound.
func sqlRow(t *testing.T) []byte {
	t.Helper()
	rows := map[sqlmodel.Dialect]*sqlmodel.Row{}
	for _, d := range []sqlmodel.Dialect{sqlmodel.SQLite, sqlmodel.Postgres, sqlmodel.MySQL, sqlmodel.Oracle} {
		r, err := sqlModel(t, d).BuildRow(shapestest.Golden(), shapestest.Stored)
		if err != nil {
			t.Fatal(err)
		}
		rows[d] = r
	}
	// The page shows one row for every dialect: check that it is one.
	for d, r := range rows {
		if diff := cmp.Diff(rows[sqlmodel.MySQL].Values, r.Values); diff != "" {
			t.Errorf("%s binds other values than mysql (-mysql +%s):\n%s", d, d, diff)
		}
	}
	cols := sqlconfig.DefaultColumns()
	var b bytes.Buffer
	for f := range sqlmodel.NumFields {
		v := rows[sqlmodel.MySQL].Values[f]
		if v == nil {
			v = "NULL"
		}
		fmt.Fprintf(&b, "%-29s %v\n", sqlmodel.Column(&cols, f), v)
	}
	return b.Bytes()
}

// envelopeFor is a message envelope built from the record package with the
// options a sink documents, to check a sink's golden fixture against.
func envelopeFor(t *testing.T, o record.EnvelopeOptions) []byte {
	t.Helper()
	e := shapestest.Golden()
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	key, err := record.CoreKey(e)
	if err != nil {
		t.Fatal(err)
	}
	o.Key, o.StoredAt = key, shapestest.Stored
	return jsonx.Marshal(record.MessageEnvelope(e, p, o), jsonx.UTF8)
}

// s3Run writes the golden message with the S3 sink to an in-process
// gofakes3 store and returns every stored object key with its user
// metadata. Keys and metadata do not depend on the clock; the bodies do,
// and are checked against the S3 package's golden files instead.
func s3Run(t *testing.T, mutate func(*s3sink.Config)) map[string]map[string]string {
	t.Helper()
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer srv.Close()
	const bucket = "nats-archive"
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	c := s3sink.Default()
	c.Bucket = bucket
	url, region, id, secret := srv.URL, "us-east-1", "DOC_KEY_ID", "DOC_SECRET"
	c.EndpointURL, c.RegionName = &url, &region
	c.AllowHTTPForLocalTesting = true
	c.CredentialMode = "environment"
	c.AWSAccessKeyIDEnv, c.AWSSecretAccessKeyEnv = &id, &secret
	lookup := func(name string) (string, bool) {
		switch name {
		case id:
			return "AKIDDOC", true
		case secret:
			return "doc-secret", true
		}
		return "", false
	}
	mutate(&c)
	ctx := context.Background()
	s, err := s3sink.New(ctx, c, sink.Deps{Env: lookup})
	if err != nil {
		t.Fatalf("s3 sink: %v", err)
	}
	defer s.Stop(ctx)
	if rs := s.WriteBatch(ctx, []*sink.Envelope{shapestest.Golden()}); rs[0].Outcome != sink.Committed {
		t.Fatalf("s3 write: %v %v", rs[0].Outcome, rs[0].Err)
	}
	list, err := backend.ListBucket(bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, o := range list.Contents {
		obj, err := backend.GetObject(bucket, o.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, obj.Contents)
		obj.Contents.Close()
		meta := map[string]string{}
		for k, v := range obj.Metadata {
			if name, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-meta-"); ok {
				meta[name] = v
			}
		}
		out[o.Key] = meta
	}
	return out
}

func sortedKeys(m map[string]map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func kafkaRecord(t *testing.T) (meta, value []byte) {
	t.Helper()
	o, err := kafkasink.Decode([]byte(`{"type": "kafka", "brokers": ["kafka-1:9092"], "topic": "orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(kafkasink.Config)
	r, err := c.Record(shapestest.Golden(), shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "topic      %s\n", r.Topic)
	fmt.Fprintf(&b, "key        %s\n", r.Key)
	fmt.Fprintf(&b, "timestamp  %s\n", r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z"))
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "header     %s: %s\n", h.Key, h.Value)
	}
	return b.Bytes(), r.Value
}

func natsMessage(t *testing.T) (meta, body []byte) {
	t.Helper()
	o, err := natssink.Decode([]byte(`{"type": "nats", "subject_prefix": "archive", "expected_stream": "ARCHIVE", "body_format": "envelope"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.(natssink.Config)
	m, err := c.Message(shapestest.Golden(), shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("subject: "+m.Subject+"\n"), headerLines(m.Header)...), m.Data
}

// sequence is an io.Reader of the bytes 0xa0, 0xa1, …: the nonce of the
// encryption example.
type sequence struct{ next byte }

func (s *sequence) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = s.next
		s.next++
	}
	return len(p), nil
}

func encryptionEnvelope(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	plain := []byte(`{"order_id":"O-1001"}`)
	env, err := seal.Encrypt(plain, seal.Settings{Algorithm: "aes-256-gcm", KeyID: "orders-2026-05", Key: key, NonceSize: 12}, &sequence{next: 0xa0})
	if err != nil {
		t.Fatal(err)
	}
	var k [32]byte
	copy(k[:], key)
	back, err := seal.Decrypt(env, seal.FixedKeyRing(seal.Key{ID: "orders-2026-05", Secret: k}))
	if err != nil || !bytes.Equal(back, plain) {
		t.Errorf("the example envelope does not decrypt to its plaintext: %q, %v", back, err)
	}
	return env
}

// encryptionEnvelopeV2 is the version 2 envelope of the same plaintext,
// key and nonce, bound to the order's message.
func encryptionEnvelopeV2(t *testing.T) []byte {
	t.Helper()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	plain := []byte(`{"order_id":"O-1001"}`)
	env, err := seal.EncryptMessage(plain, seal.Settings{Algorithm: "aes-256-gcm", KeyID: "orders-2026-05", Key: key, NonceSize: 12, EnvelopeVersion: 2},
		seal.Message{Subject: "orders.created", Stream: "ORDERS", Sequence: 42}, &sequence{next: 0xa0})
	if err != nil {
		t.Fatal(err)
	}
	var k [32]byte
	copy(k[:], key)
	back, err := seal.Decrypt(env, seal.FixedKeyRing(seal.Key{ID: "orders-2026-05", Secret: k}))
	if err != nil || !bytes.Equal(back, plain) {
		t.Errorf("the example v2 envelope does not decrypt to its plaintext: %q, %v", back, err)
	}
	return env
}

// fileRecordCustody is the order's compact file record with custody on:
// sha256, key_id custody-policy-v1, previous hash read from the header.
func fileRecordCustody(t *testing.T) []byte {
	t.Helper()
	e := shapestest.Golden()
	s := custody.Settings{Algorithm: "sha256", KeyID: "custody-policy-v1", HashPayload: true, HashMetadata: true,
		IncludePreviousHash: true, PreviousHashHeader: custody.DefaultPreviousHashHeader, MaxHashInputBytes: 16777216}
	c, err := s.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Custody = c
	out := fileRecord(t, e, true, false)
	if v := custody.VerifyFileRecord(out); v.Err != nil || len(v.Mismatches) > 0 {
		t.Errorf("the example record does not verify: %+v", v)
	}
	return out
}

// snapshot is the metrics snapshot after one batch of three messages: two
// written, one dead-lettered, all three acknowledged.
func snapshot(t *testing.T) []byte {
	t.Helper()
	m, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	m.MessagesFetched.Add(3)
	m.BatchesFetched.Inc()
	m.MessagesPrepared.Add(3)
	m.SinkBatchesWritten.Inc()
	m.SinkBatchWriteSeconds.Observe(0.004)
	m.MessagesWritten.Add(2)
	m.MessagesFailed.Inc()
	m.SinkWriteErrors.Inc()
	m.MessagesDLQ.Inc()
	m.MessagesAcked.Add(3)
	m.MessageAckSeconds.Observe(0.0005)
	m.CurrentBatchMessages.Set(3)
	m.LastSinkSuccessEpochSeconds.Set(1780048804.5)
	m.NATSConnected.Set(1)
	m.SinkHealthy.Set(1)
	file := m.Snapshot(snapshotAt)
	// The page shows the document indented; check that the file is that
	// document, compact, before rendering it.
	tree, err := jsonx.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	if compact := append(jsonx.Marshal(tree, jsonx.ASCII), '\n'); !bytes.Equal(compact, file) {
		t.Fatalf("snapshot is not compact canonical JSON:\n%s", file)
	}
	return append(jsonx.MarshalPretty(tree, jsonx.ASCII), '\n')
}

// generators returns the code that produces each example of the page,
// by example id.
func generators() map[string]func(t *testing.T) []byte {
	return map[string]func(t *testing.T) []byte{
		"file-record-json": func(t *testing.T) []byte { return fileRecord(t, shapestest.Golden(), true, true) },
		"file-record-text": func(t *testing.T) []byte { return fileRecord(t, textMessage(), false, true) },
		"file-record-bytes": func(t *testing.T) []byte {
			return fileRecord(t, bytesMessage(), false, true)
		},
		"file-record-headers-only": func(t *testing.T) []byte {
			return fileRecord(t, headersOnlyMessage(), false, true)
		},
		"file-record-compact": func(t *testing.T) []byte { return fileRecord(t, textMessage(), false, false) },
		"file-names": func(t *testing.T) []byte {
			e := shapestest.Golden()
			var b bytes.Buffer
			for _, s := range []string{record.StrategyStreamSequence, record.StrategyMessageID, record.StrategyPayloadSHA256} {
				stem, err := record.FileStem(s, e)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%-16s %s/%s.json\n", s, record.Safe(e.Subject, "subject"), stem)
			}
			return b.Bytes()
		},
		"metadata-document": func(t *testing.T) []byte {
			return append(jsonx.MarshalPretty(record.Metadata(headersOnlyMessage(), shapestest.Stored, false), jsonx.UTF8), '\n')
		},
		"payload-envelope-text":  func(t *testing.T) []byte { return payloadValue(t, []byte("hello world")) },
		"payload-envelope-bytes": func(t *testing.T) []byte { return payloadValue(t, []byte{0xff, 0x00, 0x01}) },
		"payload-envelope-empty": func(t *testing.T) []byte { return payloadValue(t, nil) },
		"dlq-body": func(t *testing.T) []byte {
			m := dlq.Build(shapestest.Golden(),
				dlq.Failure{ErrorType: sink.PermanentSinkError, Error: "file sink destination already exists: ORDERS-00000000000000000042.json"},
				dlq.Options{IncludePayload: true, IncludeHeaders: true, IncludeError: true, Consumer: "orders-file"}, failedAt)
			if want := fixture(t, "internal/dlq/testdata/dlq_file_fail.json"); !bytes.Equal(m.Body, want) {
				t.Errorf("dlq body differs from internal/dlq/testdata/dlq_file_fail.json")
			}
			return m.Body
		},
		"dlq-headers": func(t *testing.T) []byte {
			m := dlq.Build(shapestest.Golden(),
				dlq.Failure{ErrorType: sink.PermanentSinkError, Error: "file sink destination already exists: ORDERS-00000000000000000042.json"},
				dlq.Options{IncludePayload: true, IncludeHeaders: true, IncludeError: true, Consumer: "orders-file"}, failedAt)
			return headerLines(m.Header)
		},
		"encryption-envelope":    encryptionEnvelope,
		"encryption-envelope-v2": encryptionEnvelopeV2,
		"file-record-custody":    fileRecordCustody,
		"sql-row":                sqlRow,
		"ddl-sqlite": func(t *testing.T) []byte {
			m := sqlModel(t, sqlmodel.SQLite)
			return []byte(m.DDL(m.Tables[0]) + "\n")
		},
		"ddl-postgres": func(t *testing.T) []byte {
			m := sqlModel(t, sqlmodel.Postgres)
			return []byte(m.DDL(m.Tables[0]) + "\n")
		},
		"ddl-mysql": func(t *testing.T) []byte {
			m := sqlModel(t, sqlmodel.MySQL)
			return []byte(m.DDL(m.Tables[0]) + "\n")
		},
		"ddl-oracle": func(t *testing.T) []byte {
			m := sqlModel(t, sqlmodel.Oracle)
			return []byte(m.DDL(m.Tables[0]) + "\n")
		},
		"http-body": func(t *testing.T) []byte {
			body := fixture(t, "sinks/http/testdata/envelope_body.json")
			built := envelopeFor(t, record.EnvelopeOptions{Schema: "nats_sinks.http.message.v1", LabelSeparator: ",",
				IdempotencyKey: true, Metadata: true, MissionMetadata: true, SecurityLabels: true, Custody: true})
			if !bytes.Equal(body, built) {
				t.Errorf("sinks/http/testdata/envelope_body.json differs from the envelope the record package builds")
			}
			return body
		},
		"s3-object":  func(t *testing.T) []byte { return fixture(t, "sinks/s3/testdata/object_golden.json") },
		"s3-sidecar": func(t *testing.T) []byte { return fixture(t, "sinks/s3/testdata/sidecar_golden.json") },
		"s3-object-metadata": func(t *testing.T) []byte {
			got := s3Run(t, func(c *s3sink.Config) {
				prefix := "nats/orders"
				c.Prefix = &prefix
				c.MetadataMode = "sidecar"
				c.ObjectMetadata = map[string]string{"team": "billing"}
			})
			var b bytes.Buffer
			for _, key := range sortedKeys(got) {
				fmt.Fprintf(&b, "%s\n", key)
				meta := got[key]
				names := make([]string, 0, len(meta))
				for n := range meta {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Fprintf(&b, "  x-amz-meta-%s: %s\n", n, meta[n])
				}
			}
			return b.Bytes()
		},
		"s3-keys": func(t *testing.T) []byte {
			var b bytes.Buffer
			for _, strategy := range []string{"idempotency_key", "stream_sequence", "message_id", "payload_sha256"} {
				got := s3Run(t, func(c *s3sink.Config) {
					prefix := "nats/orders"
					c.Prefix = &prefix
					c.KeyStrategy = strategy
				})
				if len(got) != 1 {
					t.Fatalf("key_strategy %s stored %d objects, want 1", strategy, len(got))
				}
				fmt.Fprintf(&b, "%-16s %s\n", strategy, sortedKeys(got)[0])
			}
			got := s3Run(t, func(c *s3sink.Config) {
				kp := "prod"
				c.KeyPrefix = &kp
			})
			fmt.Fprintf(&b, "%-16s %s\n", "key_prefix prod", sortedKeys(got)[0])
			return b.Bytes()
		},
		"kafka-record": func(t *testing.T) []byte { meta, _ := kafkaRecord(t); return meta },
		"kafka-value":  func(t *testing.T) []byte { _, v := kafkaRecord(t); return v },
		"nats-message": func(t *testing.T) []byte { meta, _ := natsMessage(t); return meta },
		"nats-body": func(t *testing.T) []byte {
			_, body := natsMessage(t)
			if want := fixture(t, "sinks/nats/testdata/envelope_golden.json"); !bytes.Equal(body, want) {
				t.Errorf("nats envelope differs from sinks/nats/testdata/envelope_golden.json")
			}
			return body
		},
		"metrics-snapshot": snapshot,
	}
}
