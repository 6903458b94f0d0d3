package cli

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/embedded"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// demoSample is one published message of the tour (README.md) and what each
// pipeline is expected to do with it.
type demoSample struct {
	kind, subject string
	body          []byte
	msgID         string
	headers       map[string]string
	wantFile      string
	wantSQLite    string
	wantAudit     string
}

func demoSamples() []demoSample {
	binary := []byte{0x00, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0}
	return []demoSample{
		{kind: "json", subject: "demo.orders.created", body: []byte(`{"order_id":"O-1001","amount":42.5}`), msgID: "demo-json-1",
			headers:  map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Nats-Sinks-Priority": "high"},
			wantFile: "written (json)", wantSQLite: "row", wantAudit: "-"},
		{kind: "text", subject: "demo.notes", body: []byte("hello from nats-sink"), msgID: "demo-text-1", wantFile: "written (text)", wantSQLite: "row", wantAudit: "-"},
		{kind: "binary", subject: "demo.blobs", body: binary, msgID: "demo-binary-1", wantFile: "written (bytes)", wantSQLite: "row", wantAudit: "-"},
		{kind: "empty", subject: "demo.heartbeat", body: nil, msgID: "demo-empty-1", wantFile: "written (text, 0 B)", wantSQLite: "row", wantAudit: "-"},
		{kind: "headers-only", subject: "demo.audit.login", body: []byte(`{"user":"alice"}`), msgID: "demo-audit-1",
			wantFile: "written (json)", wantSQLite: "row", wantAudit: "written (omitted, 16 B)"},
		{kind: "poison", subject: "demo.orders.poison", body: []byte(`{"order_id":"O-1002"}`), wantFile: "DLQ PermanentSinkError", wantSQLite: "DLQ ValidationError", wantAudit: "-"},
		{kind: "encrypted", subject: "demo.secure.report", body: []byte(`{"report":"classified"}`), msgID: "demo-secure-1",
			wantFile: "written (aes-256-gcm)", wantSQLite: "row (aes-256-gcm)", wantAudit: "-"},
	}
}

const demoKeyEnv = "NATS_SINKS_DEMO_KEY_B64"

func runDemo(env *Env, args []string) int {
	fs := newFlags(env, "demo", "[--dir DIR] [--port N] [--timeout SECONDS] [--keep-running] [--format table|json]")
	dir := fs.String("dir", "", "directory for the server store and the sink output (default: a new temp directory)")
	port := fs.Int("port", -1, "NATS port (default: a free port)")
	timeout := fs.Float64("timeout", 30, "seconds to wait for every pipeline to settle")
	keep := fs.Bool("keep-running", false, "keep the server and pipelines running until a signal")
	format := fs.String("format", "table", "table or json")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 || (*format != "table" && *format != "json") || *timeout <= 0 || *port < -1 || *port > 65535 {
		fs.Usage()
		return exitConfig
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()
	d := &demo{env: env, dir: *dir, port: *port, timeout: time.Duration(*timeout * float64(time.Second)), format: *format}
	return d.run(ctx, *keep)
}

type demo struct {
	env     *Env
	dir     string
	port    int
	timeout time.Duration
	format  string

	server *server.Server
	url    string
	nc     *nats.Conn
	js     jetstream.JetStream
}

// demoPipeline is one of the tour's pipelines.
type demoPipeline struct {
	name, consumer, filter string
	sink                   string // the sink object, JSON
	headersOnly            bool
}

func (d *demo) pipelines() []demoPipeline {
	q := func(s string) string { return string(jsonx.Marshal(s, jsonx.UTF8)) }
	return []demoPipeline{
		{name: "file", consumer: "demo-file", filter: "demo.>",
			sink: `{"type": "file", "directory": ` + q(filepath.Join(d.dir, "files")) + `, "filename_strategy": "message_id"}`},
		{name: "sqlite", consumer: "demo-sqlite", filter: "demo.>",
			sink: `{"type": "sqlite", "path": ` + q(d.dbPath()) + `, "table": "events", "idempotency": {"strategy": "message_id"}}`},
		{name: "audit", consumer: "demo-audit", filter: "demo.audit.>", headersOnly: true,
			sink: `{"type": "file", "directory": ` + q(filepath.Join(d.dir, "audit")) + `, "filename_strategy": "message_id"}`},
	}
}

func (d *demo) dbPath() string { return filepath.Join(d.dir, "demo.db") }

func (d *demo) run(ctx context.Context, keepRunning bool) int {
	start := time.Now()
	err := d.setup(ctx)
	if d.server != nil {
		defer d.server.Shutdown()
	}
	if d.nc != nil {
		defer d.nc.Close()
	}
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	key := make([]byte, 32)
	rand.Read(key)
	keyB64 := base64.StdEncoding.EncodeToString(key)
	if err := os.WriteFile(filepath.Join(d.dir, "demo-key.b64"), []byte(keyB64+"\n"), 0o600); err != nil {
		fmt.Fprintf(d.env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	getenv := func(name string) (string, bool) {
		if name == demoKeyEnv {
			return keyB64, true
		}
		return d.env.Getenv(name)
	}

	runCtx, stopRunners := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRunners()
	var running []*pipeline.Pipeline
	errs := make(chan error, len(d.pipelines()))
	for _, dp := range d.pipelines() {
		p, err := d.start(ctx, dp, getenv)
		if err != nil {
			fmt.Fprintf(d.env.Stderr, "Runtime error: pipeline %s: %v\n", dp.name, err)
			return exitRuntime
		}
		defer p.Close(5 * time.Second)
		running = append(running, p)
		go func() { errs <- p.Run(runCtx) }()
	}

	lastSeq, err := d.publish(ctx)
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	if err := d.settle(ctx, lastSeq); err != nil {
		fmt.Fprintf(d.env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	res, err := d.observe(ctx)
	if err != nil {
		fmt.Fprintf(d.env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	res.elapsed = time.Since(start)
	d.print(res)

	if keepRunning && ctx.Err() == nil {
		fmt.Fprintf(d.env.Stdout, "NATS is running at %s; press Ctrl-C to stop.\n", d.url)
		<-ctx.Done()
	}
	stopRunners()
	for range running {
		<-errs
	}
	if len(res.mismatches) > 0 {
		for _, m := range res.mismatches {
			fmt.Fprintf(d.env.Stderr, "demo: %s\n", m)
		}
		return exitRuntime
	}
	return exitOK
}

// setup creates the directory, the embedded server and the streams.
func (d *demo) setup(ctx context.Context) error {
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "nats-sink-demo-")
		if err != nil {
			return err
		}
		d.dir = dir
	} else if err := os.MkdirAll(d.dir, 0o750); err != nil {
		return err
	}
	s, err := embedded.Start(filepath.Join(d.dir, "nats"), d.port)
	if err != nil {
		return fmt.Errorf("start embedded nats-server: %w", err)
	}
	d.server = s
	d.url = s.ClientURL()
	if d.nc, err = nats.Connect(d.url, nats.Name("nats-sink demo")); err != nil {
		return err
	}
	if d.js, err = jetstream.New(d.nc); err != nil {
		return err
	}
	if _, err := d.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "DEMO", Subjects: []string{"demo.>"}, Duplicates: 2 * time.Minute}); err != nil {
		return fmt.Errorf("create stream DEMO: %w", err)
	}
	if _, err := d.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "DEMO_DLQ", Subjects: []string{"dlq.demo"}}); err != nil {
		return fmt.Errorf("create stream DEMO_DLQ: %w", err)
	}
	return nil
}

// start builds one pipeline from a configuration document, through the same
// loader and start-up path as `run`.
func (d *demo) start(ctx context.Context, dp demoPipeline, getenv func(string) (string, bool)) (*pipeline.Pipeline, error) {
	headersOnly := ""
	if dp.headersOnly {
		headersOnly = `, "headers_only": true`
	}
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "DEMO", "consumer": %q, "subject": %q},
  "consumer_management": {"max_ack_pending": 1000%s},
  "delivery": {"batch_size": 100, "batch_timeout_ms": 200, "max_in_flight_batches": 2, "retry_backoff_ms": 200},
  "dead_letter": {"enabled": true, "subject": "dlq.demo"},
  "encryption": {"rules": [{"subject": "demo.secure.>", "key_id": "demo", "key_b64_env": %q}]},
  "sink": %s
}`, d.url, dp.consumer, dp.filter, headersOnly, demoKeyEnv, dp.sink)
	cfg, err := config.Parse([]byte(doc), "demo-"+dp.name+".json", builtin.Registry(), config.Env(getenv))
	if err != nil {
		return nil, err
	}
	log := telemetry.NewLogger(d.env.Stderr, "text", "ERROR")
	return pipeline.Start(ctx, cfg, pipeline.Options{Env: config.Env(getenv), Logger: log, Conn: d.nc, Version: Version})
}

// publish sends the samples and returns, per consumer, the stream sequence
// of the last sample its filter takes.
func (d *demo) publish(ctx context.Context) (map[string]uint64, error) {
	lastSeq := map[string]uint64{}
	pipelines := d.pipelines()
	for _, s := range demoSamples() {
		m := nats.NewMsg(s.subject)
		m.Data = s.body
		for k, v := range s.headers {
			m.Header.Set(k, v)
		}
		var opts []jetstream.PublishOpt
		if s.msgID != "" {
			opts = append(opts, jetstream.WithMsgID(s.msgID))
		}
		ack, err := d.js.PublishMsg(ctx, m, opts...)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", s.subject, err)
		}
		for _, dp := range pipelines {
			if subject.Match(dp.filter, s.subject) {
				lastSeq[dp.consumer] = ack.Sequence
			}
		}
	}
	return lastSeq, nil
}

// settle waits until every pipeline's consumer has delivered the last
// sample its filter takes and has no pending and no unacknowledged
// message. The delivered sequence matters: the server counts a stored
// message into a consumer's pending asynchronously, so right after the
// publishes a consumer can report nothing pending before it saw any of
// them (seen in the container image test under load).
func (d *demo) settle(ctx context.Context, lastSeq map[string]uint64) error {
	deadline := time.Now().Add(d.timeout)
	for _, dp := range d.pipelines() {
		c, err := d.js.Consumer(ctx, "DEMO", dp.consumer)
		if err != nil {
			return err
		}
		for {
			info, err := c.Info(ctx)
			if err == nil && info.Delivered.Stream >= lastSeq[dp.consumer] &&
				info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pipeline %s did not settle every message within %v", dp.name, d.timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// demoResult is what the tour observed.
type demoResult struct {
	file, sqlite, audit []string // per sample, in demoSamples order
	written             int
	dead                int
	acked               int
	mismatches          []string
	elapsed             time.Duration
}

// observe reads what the pipelines wrote, from disk and the DLQ stream.
func (d *demo) observe(ctx context.Context) (*demoResult, error) {
	dead, err := d.deadLetters(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := d.sqliteRows(ctx)
	if err != nil {
		return nil, err
	}
	res := &demoResult{dead: len(dead)}
	for _, s := range demoSamples() {
		fileGot := d.outcome(filepath.Join(d.dir, "files", s.subject), dead["demo-file/"+s.subject], false)
		sqliteGot := "missing"
		switch {
		case dead["demo-sqlite/"+s.subject] != "":
			sqliteGot = "DLQ " + dead["demo-sqlite/"+s.subject]
		case rows[s.subject] != "":
			sqliteGot = rows[s.subject]
		}
		res.sqlite = append(res.sqlite, sqliteGot)
		if strings.HasPrefix(sqliteGot, "row") {
			res.written++
		}
		if sqliteGot != s.wantSQLite {
			res.mismatches = append(res.mismatches, fmt.Sprintf("%s (%s) sqlite pipeline: got %q, want %q", s.kind, s.subject, sqliteGot, s.wantSQLite))
		}
		auditGot := "-"
		if strings.HasPrefix(s.subject, "demo.audit.") {
			auditGot = d.outcome(filepath.Join(d.dir, "audit", s.subject), dead["demo-audit/"+s.subject], true)
		}
		res.file = append(res.file, fileGot)
		res.audit = append(res.audit, auditGot)
		for _, got := range []string{fileGot, auditGot} {
			if strings.HasPrefix(got, "written") {
				res.written++
			}
		}
		if fileGot != s.wantFile {
			res.mismatches = append(res.mismatches, fmt.Sprintf("%s (%s) file pipeline: got %q, want %q", s.kind, s.subject, fileGot, s.wantFile))
		}
		if auditGot != s.wantAudit {
			res.mismatches = append(res.mismatches, fmt.Sprintf("%s (%s) audit pipeline: got %q, want %q", s.kind, s.subject, auditGot, s.wantAudit))
		}
	}
	for _, dp := range d.pipelines() {
		c, err := d.js.Consumer(ctx, "DEMO", dp.consumer)
		if err != nil {
			return nil, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		res.acked += int(info.AckFloor.Consumer)
	}
	return res, nil
}

// sqliteRows describes the demo database's rows per subject: "row", or
// "row (<algorithm>)" when the stored payload is an encryption envelope.
func (d *demo) sqliteRows(ctx context.Context) (map[string]string, error) {
	db, err := sql.Open("sqlite", "file:"+d.dbPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rs, err := db.QueryContext(ctx, `select "subject", "payload_json" from "events"`)
	if err != nil {
		return nil, fmt.Errorf("read the demo database: %w", err)
	}
	defer rs.Close()
	out := map[string]string{}
	for rs.Next() {
		var subject string
		var payload sql.NullString
		if err := rs.Scan(&subject, &payload); err != nil {
			return nil, err
		}
		out[subject] = "row"
		if doc, err := jsonx.Parse([]byte(payload.String)); err == nil {
			if m, ok := doc.(map[string]any); ok {
				if enc, ok := m["_nats_sinks_encryption"].(map[string]any); ok {
					out[subject] = fmt.Sprintf("row (%v)", enc["algorithm"])
				}
			}
		}
	}
	return out, rs.Err()
}

// deadLetters returns the DLQ error type per "<consumer>/<original subject>".
func (d *demo) deadLetters(ctx context.Context) (map[string]string, error) {
	st, err := d.js.Stream(ctx, "DEMO_DLQ")
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		// Nats-Msg-Id is nats-sinks-dlq:<consumer>:<core key>.
		parts := strings.SplitN(m.Header.Get("Nats-Msg-Id"), ":", 3)
		if len(parts) < 2 {
			continue
		}
		out[parts[1]+"/"+m.Header.Get("x-original-subject")] = m.Header.Get("Nats-Sinks-Error-Type")
	}
	return out, nil
}

// outcome describes what one pipeline did with one sample: the record file
// in dir, or its dead letter.
func (d *demo) outcome(dir, deadType string, audit bool) string {
	if deadType != "" {
		return "DLQ " + deadType
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		return "missing"
	}
	data, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		return "unreadable"
	}
	doc, err := jsonx.Parse(data)
	rec, ok := doc.(map[string]any)
	if err != nil || !ok {
		return "unreadable"
	}
	info, _ := rec["payload_info"].(map[string]any)
	format, _ := info["original_format"].(string)
	if audit {
		meta, _ := rec["metadata"].(map[string]any)
		pl, _ := meta["payload"].(map[string]any)
		if pl["present"] == false {
			return fmt.Sprintf("written (omitted, %v B)", pl["original_size_bytes"])
		}
	}
	if payload, ok := rec["payload"].(map[string]any); ok {
		if enc, ok := payload["_nats_sinks_encryption"].(map[string]any); ok {
			return fmt.Sprintf("written (%v)", enc["algorithm"])
		}
	}
	if size := fmt.Sprint(info["size_bytes"]); size == "0" {
		return fmt.Sprintf("written (%s, 0 B)", format)
	}
	return fmt.Sprintf("written (%s)", format)
}

func (d *demo) print(res *demoResult) {
	samples := demoSamples()
	if d.format == "json" {
		var rows []any
		for i, s := range samples {
			rows = append(rows, map[string]any{"kind": s.kind, "subject": s.subject, "file": res.file[i], "sqlite": res.sqlite[i],
				"audit": res.audit[i], "expected_file": s.wantFile, "expected_sqlite": s.wantSQLite, "expected_audit": s.wantAudit})
		}
		doc := map[string]any{"nats_url": d.url, "dir": d.dir, "samples": rows, "published": len(samples),
			"written": res.written, "dead_lettered": res.dead, "acked": res.acked,
			"elapsed_seconds": res.elapsed.Seconds(), "ok": len(res.mismatches) == 0}
		d.env.Stdout.Write(append(jsonx.Marshal(doc, jsonx.UTF8), '\n'))
		return
	}
	w := d.env.Stdout
	fmt.Fprintf(w, "nats-sink demo — embedded NATS at %s, files in %s\n\n", d.url, d.dir)
	fmt.Fprintf(w, "%-13s %-20s %-23s %-23s %s\n", "KIND", "SUBJECT", "FILE", "SQLITE", "AUDIT (headers-only)")
	for i, s := range samples {
		fmt.Fprintf(w, "%-13s %-20s %-23s %-23s %s\n", s.kind, s.subject, res.file[i], res.sqlite[i], res.audit[i])
	}
	fmt.Fprintf(w, "\npublished %d · written %d · dead-lettered %d · acked %d · elapsed %.2f s\n",
		len(samples), res.written, res.dead, res.acked, res.elapsed.Seconds())
	secure := filepath.Join(d.dir, "files", "demo.secure.report")
	name := "<file>"
	if entries, err := os.ReadDir(secure); err == nil && len(entries) == 1 {
		name = entries[0].Name()
	}
	fmt.Fprintf(w, "next: %s=$(cat %s) nats-sink decrypt %s --key-env %s\n", demoKeyEnv,
		filepath.Join(d.dir, "demo-key.b64"), filepath.Join(secure, name), demoKeyEnv)
}
