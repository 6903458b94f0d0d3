package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/jsapi"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/ops"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

const (
	dlqListUsage    = "list CONFIG [--subject PATTERN] [--reason TYPE]... [--consumer NAME] [--since T] [--until T] [--from-seq N] [--limit N] [--json] [--dlq-stream NAME]"
	dlqShowUsage    = "show CONFIG SEQ [--json] [--payload] [--dlq-stream NAME]"
	dlqRedriveUsage = "redrive CONFIG (SEQ... | --all) [filters] [--to SUBJECT] [--dry-run] [--rate N] [--purge] [--without-headers] [--key KEY_ID=ENV]... [--json] [--dlq-stream NAME]"
)

// runDLQ is `nats-sink dlq list|show|redrive` (docs/operations.md): read
// the entries of dead_letter.subject and republish them.
func runDLQ(env *Env, args []string) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: %s dlq %s\n", env.Program, dlqListUsage)
		fmt.Fprintf(w, "       %s dlq %s\n", env.Program, dlqShowUsage)
		fmt.Fprintf(w, "       %s dlq %s\n", env.Program, dlqRedriveUsage)
	}
	if len(args) == 0 {
		fmt.Fprintf(env.Stderr, "%s dlq: missing subcommand (list, show or redrive)\n", env.Program)
		usage(env.Stderr)
		return exitConfig
	}
	switch args[0] {
	case "list":
		return runDLQList(env, args[1:])
	case "show":
		return runDLQShow(env, args[1:])
	case "redrive":
		return runDLQRedrive(env, args[1:])
	case "--help", "-help", "-h", "help":
		usage(env.Stdout)
		return exitOK
	}
	fmt.Fprintf(env.Stderr, "%s dlq: unknown subcommand %q\n", env.Program, args[0])
	usage(env.Stderr)
	return exitConfig
}

// dlqFailed prints a dlq runtime failure, or a configuration error, and
// returns the exit code.
func dlqFailed(env *Env, err error) int {
	if errors.Is(err, sink.ErrConfig) {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	fmt.Fprintf(env.Stderr, "DLQ failed: %v\n", err)
	return exitRuntime
}

// openDLQ loads the configuration, runs check on it (nil: none; it prints
// its own error and returns an exit code, or -1), connects and locates the
// DLQ stream.
func openDLQ(env *Env, path, dlqStream string, check func(*config.Config) int) (*config.Config, *opsConn, *ops.DLQ, int) {
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return nil, nil, nil, code
	}
	if cfg.DeadLetter.Subject == nil {
		fmt.Fprintln(env.Stderr, "Configuration error: dead_letter.subject: required by nats-sink dlq")
		return nil, nil, nil, exitConfig
	}
	if check != nil {
		if code := check(cfg); code >= 0 {
			return nil, nil, nil, code
		}
	}
	conn, err := connectOps(env, cfg)
	if err != nil {
		return nil, nil, nil, dlqFailed(env, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*jsapi.DefaultTimeout)
	defer cancel()
	subj := *cfg.DeadLetter.Subject
	stream, err := ops.LocateDLQ(ctx, conn.api, subj, dlqStream)
	if err != nil {
		conn.Close()
		return nil, nil, nil, dlqFailed(env, err)
	}
	return cfg, conn, &ops.DLQ{API: conn.api, Stream: stream, Subject: subj}, -1
}

// dlqFilterFlags are the entry filters of list and redrive --all.
type dlqFilterFlags struct {
	subject, consumer, since, until string
	reasons                         stringList
	fromSeq                         uint64
	limit                           int
}

func (f *dlqFilterFlags) register(fs *flag.FlagSet, limit int, limitHelp string) {
	fs.StringVar(&f.subject, "subject", "", "only entries whose original subject matches PATTERN")
	fs.Var(&f.reasons, "reason", "only entries with this error_type (repeatable: any of)")
	fs.StringVar(&f.consumer, "consumer", "", "only entries dead-lettered by consumer NAME")
	fs.StringVar(&f.since, "since", "", "only entries stored at or after T (RFC 3339 or an age like 30m)")
	fs.StringVar(&f.until, "until", "", "only entries stored before T (RFC 3339 or an age like 30m)")
	fs.Uint64Var(&f.fromSeq, "from-seq", 0, "start at DLQ sequence N")
	fs.IntVar(&f.limit, "limit", limit, limitHelp)
}

// given reports whether any filter flag was set.
func (f *dlqFilterFlags) given(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "subject", "reason", "consumer", "since", "until", "from-seq", "limit":
			set = true
		}
	})
	return set
}

func (f *dlqFilterFlags) filter(now time.Time, limitRequired bool) (dlq.Filter, error) {
	var out dlq.Filter
	if limitRequired || f.limit != 0 {
		if f.limit < 1 || f.limit > 1_000_000 {
			return out, fmt.Errorf("--limit: must be between 1 and 1000000 (got %d)", f.limit)
		}
	}
	if f.subject != "" {
		if err := subject.Validate(f.subject); err != nil {
			return out, fmt.Errorf("--subject: %v", err)
		}
	}
	var err error
	if f.since != "" {
		if out.Since, err = ops.ParseTime("--since", f.since, now); err != nil {
			return out, err
		}
	}
	if f.until != "" {
		if out.Until, err = ops.ParseTime("--until", f.until, now); err != nil {
			return out, err
		}
	}
	out.Subject, out.Consumer, out.Reasons = f.subject, f.consumer, f.reasons
	return out, nil
}

func runDLQList(env *Env, args []string) int {
	fs := newFlags(env, "dlq list", strings.TrimPrefix(dlqListUsage, "list "))
	var ff dlqFilterFlags
	ff.register(fs, 100, "list at most N entries (1..1000000)")
	asJSON := fs.Bool("json", false, "print one JSON object per entry (JSON Lines)")
	dlqStream := fs.String("dlq-stream", "", "the stream holding dead_letter.subject, when several capture it")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	filter, err := ff.filter(time.Now(), true)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	_, conn, d, code := openDLQ(env, path, *dlqStream, nil)
	if d == nil {
		return code
	}
	defer conn.Close()

	var entries []*dlq.Entry
	more := false
	err = d.Scan(context.Background(), ff.fromSeq, filter.Since, func(e *dlq.Entry) bool {
		if !filter.Match(e) {
			return true
		}
		if len(entries) == ff.limit {
			more = true
			return false
		}
		entries = append(entries, e)
		return true
	})
	if err != nil {
		return dlqFailed(env, err)
	}
	if *asJSON {
		for _, e := range entries {
			fmt.Fprintf(env.Stdout, "%s\n", jsonx.Marshal(entryJSON(e), jsonx.UTF8))
		}
		return exitOK
	}
	t := &table{}
	t.add("DLQ SEQ", "TIME", "SUBJECT", "STREAM", "SEQ", "REASON", "PAYLOAD", "ERROR")
	for _, e := range entries {
		seq, payload := "-", e.PayloadState()
		if e.StreamSequence > 0 {
			seq = strconv.FormatUint(e.StreamSequence, 10)
		}
		if !e.Record {
			payload = "-"
		}
		errText := "-"
		if s, ok := e.ErrorText(); ok {
			errText = dlq.Short(s, 60)
		}
		t.add(strconv.FormatUint(e.Seq, 10), tableTime(e.Stored), dash(e.Subject), dash(e.Stream), seq,
			dash(e.ErrorType), payload, errText)
	}
	t.write(env.Stdout)
	footer := fmt.Sprintf("%d entries", len(entries))
	if more {
		footer += " (limit reached)"
	}
	fmt.Fprintln(env.Stdout, footer)
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// entryJSON is the `dlq list --json` object of an entry.
func entryJSON(e *dlq.Entry) map[string]any {
	var streamSeq, errText any
	if e.StreamSequence > 0 {
		streamSeq = e.StreamSequence
	}
	if s, ok := e.ErrorText(); ok {
		errText = s
	}
	return map[string]any{
		"dlq_seq":         e.Seq,
		"time":            record.ISO(e.Stored),
		"subject":         nullable(e.Subject),
		"stream":          nullable(e.Stream),
		"stream_sequence": streamSeq,
		"consumer":        nullable(e.Consumer),
		"message_id":      nullable(e.MessageID),
		"idempotency_key": nullable(e.IdempotencyKey),
		"error_type":      nullable(e.ErrorType),
		"error":           errText,
		"payload":         e.PayloadState(),
	}
}

func runDLQShow(env *Env, args []string) int {
	fs := newFlags(env, "dlq show", strings.TrimPrefix(dlqShowUsage, "show "))
	asJSON := fs.Bool("json", false, "print the entry as one JSON object")
	withPayload := fs.Bool("payload", false, "also print the decoded payload_base64")
	dlqStream := fs.String("dlq-stream", "", "the stream holding dead_letter.subject, when several capture it")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) != 2 {
		fmt.Fprintf(env.Stderr, "%s dlq show: expected CONFIG and SEQ\n", env.Program)
		fs.Usage()
		return exitConfig
	}
	seq, err := strconv.ParseUint(pos[1], 10, 64)
	if err != nil || seq == 0 {
		fmt.Fprintf(env.Stderr, "%s dlq show: SEQ must be a positive integer (got %q)\n", env.Program, pos[1])
		fs.Usage()
		return exitConfig
	}
	_, conn, d, code := openDLQ(env, pos[0], *dlqStream, nil)
	if d == nil {
		return code
	}
	defer conn.Close()
	e, err := d.Get(context.Background(), seq)
	if err != nil {
		return dlqFailed(env, err)
	}
	if *asJSON {
		headers := map[string]any{}
		for k, v := range e.Header {
			headers[k] = v
		}
		var body, body64 any
		if e.Record {
			body = e.Doc
		} else {
			body64 = base64.StdEncoding.EncodeToString(e.Body)
		}
		fmt.Fprintf(env.Stdout, "%s\n", jsonx.Marshal(map[string]any{
			"body": body, "body_base64": body64, "headers": headers,
			"seq": e.Seq, "stored_at": record.ISO(e.Stored), "stream": d.Stream, "subject": d.Subject,
		}, jsonx.UTF8))
		return exitOK
	}
	w := env.Stdout
	fmt.Fprintf(w, "DLQ entry %d · stream %s · subject %s · stored %s\n", e.Seq, d.Stream, d.Subject, tableTime(e.Stored))
	fmt.Fprintln(w, "Headers:")
	for _, name := range slices.Sorted(maps.Keys(e.Header)) {
		for _, v := range e.Header[name] {
			fmt.Fprintf(w, "  %s: %s\n", escapeControls(name), escapeControls(v))
		}
	}
	if doc, err := jsonx.Parse(e.Body); err == nil {
		fmt.Fprintln(w, "Body:")
		fmt.Fprintf(w, "%s\n", jsonx.MarshalPretty(doc, jsonx.UTF8))
	} else {
		fmt.Fprintf(w, "Body (not JSON, %d bytes, base64):\n%s\n", len(e.Body), base64.StdEncoding.EncodeToString(e.Body))
	}
	if *withPayload {
		switch {
		case !e.HasPayload && e.Unavailable != "":
			fmt.Fprintf(w, "Payload: omitted (%s)\n", e.Unavailable)
		case !e.HasPayload:
			fmt.Fprintln(w, "Payload: not included")
		default:
			data, err := base64.StdEncoding.Strict().DecodeString(e.PayloadBase64)
			if err != nil {
				fmt.Fprintln(w, "Payload: payload_base64 is not valid base64")
				break
			}
			if doc, err := jsonx.Parse(data); err == nil {
				fmt.Fprintf(w, "Payload (%d bytes, json):\n%s\n", len(data), jsonx.MarshalPretty(doc, jsonx.UTF8))
			} else if utf8.Valid(data) {
				fmt.Fprintf(w, "Payload (%d bytes, text):\n%s\n", len(data), data)
			} else {
				fmt.Fprintf(w, "Payload (%d bytes, binary):\n%s\n", len(data), base64.StdEncoding.EncodeToString(data))
			}
		}
	}
	return exitOK
}

// escapeControls writes control bytes (C0 and DEL) as \xNN, so a header
// value cannot move the terminal's cursor or fake another line.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, `\x%02x`, c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Redrive outcomes (docs/operations.md).
const (
	outRedriven     = "redriven"
	outDuplicate    = "duplicate"
	outBlocked      = "blocked"
	outRefused      = "refused"
	outFailed       = "failed"
	outPurgeFailed  = "purge-failed"
	outWouldRedrive = "would-redrive"
)

// redriveCounts are the summary counters.
type redriveCounts struct {
	selected, redriven, duplicate, blocked, refused, failed, purged, purgeFailed, would int
}

func runDLQRedrive(env *Env, args []string) int {
	fs := newFlags(env, "dlq redrive", strings.TrimPrefix(dlqRedriveUsage, "redrive "))
	var ff dlqFilterFlags
	ff.register(fs, 0, "with --all, redrive at most N entries (1..1000000; default all)")
	all := fs.Bool("all", false, "redrive every entry that passes the filters")
	to := fs.String("to", "", "publish to this literal subject instead of the original one")
	dryRun := fs.Bool("dry-run", false, "decode, decrypt and classify, but publish and delete nothing")
	rate := fs.Int("rate", 0, "publish at most N messages per second (1..100000)")
	purge := fs.Bool("purge", false, "delete each entry from the DLQ stream after its republish was acknowledged")
	withoutHeaders := fs.Bool("without-headers", false, "redrive entries whose body holds no headers, without them")
	var keys keyFlags
	fs.Var(&keys, "key", "KEY_ID=ENV: decrypt envelopes with this key_id using the key in variable ENV (repeatable)")
	asJSON := fs.Bool("json", false, "print one JSON object per entry and a summary object")
	dlqStream := fs.String("dlq-stream", "", "the stream holding dead_letter.subject, when several capture it")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "%s dlq redrive: %s\n", env.Program, fmt.Sprintf(format, a...))
		fs.Usage()
		return exitConfig
	}
	if len(pos) == 0 {
		return usageErr("missing CONFIG argument")
	}
	var seqs []uint64
	for _, s := range pos[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return usageErr("SEQ must be a positive integer (got %q)", s)
		}
		seqs = append(seqs, n)
	}
	switch {
	case len(seqs) == 0 && !*all:
		return usageErr("give the DLQ sequences to redrive, or --all")
	case len(seqs) > 0 && *all:
		return usageErr("give DLQ sequences or --all, not both")
	case len(seqs) > 0 && ff.given(fs):
		return usageErr("filters select entries for --all; they do not apply to listed sequences")
	}
	filter, err := ff.filter(time.Now(), false)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	rateGiven := false
	fs.Visit(func(f *flag.Flag) { rateGiven = rateGiven || f.Name == "rate" })
	if rateGiven && (*rate < 1 || *rate > 100_000) {
		fmt.Fprintf(env.Stderr, "Configuration error: --rate: must be between 1 and 100000 (got %d)\n", *rate)
		return exitConfig
	}
	extra, err := decryptKeyList(env, keys)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	checkTo := func(cfg *config.Config) int {
		switch {
		case *to == "":
		case *to == *cfg.DeadLetter.Subject:
			fmt.Fprintf(env.Stderr, "Configuration error: --to: must not be dead_letter.subject %q\n", *to)
			return exitConfig
		case !subject.IsLiteral(*to):
			fmt.Fprintf(env.Stderr, "Configuration error: --to: must be a literal subject (got %q)\n", *to)
			return exitConfig
		}
		return -1
	}
	cfg, conn, d, code := openDLQ(env, pos[0], *dlqStream, checkTo)
	if d == nil {
		return code
	}
	defer conn.Close()

	ctx, stop := env.Signals(context.Background())
	defer stop()
	// Listed sequences are all checked before anything is published: an
	// unknown one stops the command with nothing done.
	var listed []*dlq.Entry
	for _, s := range slices.Compact(slices.Sorted(slices.Values(seqs))) {
		e, err := d.Get(ctx, s)
		if err != nil {
			return dlqFailed(env, err)
		}
		listed = append(listed, e)
	}

	rd := &redriver{
		env: env, js: conn.js, api: conn.api, d: d, dryRun: *dryRun, purge: *purge, asJSON: *asJSON,
		timeout: time.Duration(cfg.DeadLetter.PublishTimeoutMS) * time.Millisecond,
		opts: dlq.RedriveOptions{DLQStream: d.Stream, To: *to, WithoutHeaders: *withoutHeaders,
			Unseal: ops.Unsealer(&cfg.Encryption, config.Env(env.Getenv), extra)},
	}
	if *rate > 0 {
		rd.interval = time.Second / time.Duration(*rate)
	}
	if *all {
		err = rd.all(ctx, d, ff.fromSeq, filter, ff.limit)
	} else {
		for _, e := range listed {
			if ctx.Err() != nil {
				break
			}
			rd.one(ctx, e)
		}
	}
	if err != nil && ctx.Err() == nil {
		// Entries already processed were printed; the summary says
		// incomplete after the failure line.
		fmt.Fprintf(env.Stderr, "DLQ failed: %v\n", err)
	}
	return rd.summary(err != nil || ctx.Err() != nil)
}

// all redrives every entry passing filter, at most limit (0: no limit).
// A goroutine reads the entries ahead while they are published, so that a
// MSG.GET round trip and a PubAck round trip overlap; the entries are still
// published one at a time in ascending DLQ sequence.
func (rd *redriver) all(ctx context.Context, d *ops.DLQ, from uint64, filter dlq.Filter, limit int) error {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	entries := make(chan *dlq.Entry, 256)
	scanned := make(chan error, 1)
	go func() {
		defer close(entries)
		scanned <- d.Scan(sctx, from, filter.Since, func(e *dlq.Entry) bool {
			if !filter.Match(e) {
				return true
			}
			select {
			case entries <- e:
				return true
			case <-sctx.Done():
				return false
			}
		})
	}()
	early := false // stopped before the reader reached the end
	for e := range entries {
		if ctx.Err() != nil || limit > 0 && rd.n.selected >= limit {
			early = true
			break
		}
		rd.one(ctx, e)
	}
	stop()
	for range entries { // let the reader see the stop and return
	}
	if err := <-scanned; err != nil && !early && ctx.Err() == nil {
		return err
	}
	return nil
}

// decryptKeyList reads the --key KEY_ID=ENV flags.
func decryptKeyList(env *Env, keys keyFlags) ([]seal.Key, error) {
	var out []seal.Key
	for _, kv := range keys {
		id, name, ok := strings.Cut(kv, "=")
		if !ok || id == "" || name == "" {
			return nil, fmt.Errorf("--key: expected KEY_ID=ENV (got %q)", kv)
		}
		v, ok := env.Getenv(name)
		if !ok {
			return nil, fmt.Errorf("--key %s: environment variable %s is not set", id, name)
		}
		k, err := seal.ParseKey(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("--key %s: environment variable %s: %v", id, name, err)
		}
		out = append(out, seal.Key{ID: id, Secret: k})
	}
	return out, nil
}

// redriver republishes entries one at a time, in ascending DLQ sequence.
type redriver struct {
	env      *Env
	js       jetstream.JetStream
	api      *jsapi.Client
	d        *ops.DLQ
	opts     dlq.RedriveOptions
	dryRun   bool
	purge    bool
	asJSON   bool
	timeout  time.Duration
	interval time.Duration // --rate; 0 unlimited
	last     time.Time     // of the previous publish
	n        redriveCounts
}

// one handles entry e and prints its line.
func (rd *redriver) one(ctx context.Context, e *dlq.Entry) {
	rd.n.selected++
	r, err := e.Redrive(rd.opts)
	subj := e.Subject
	if rd.opts.To != "" {
		subj = rd.opts.To
	}
	if err != nil {
		rd.n.refused++
		rd.line(e.Seq, outRefused, subj, 0, err.Error())
		return
	}
	if rd.dryRun {
		rd.n.would++
		rd.line(e.Seq, outWouldRedrive, r.Subject, 0, "")
		return
	}
	if rd.interval > 0 && !rd.last.IsZero() {
		select {
		case <-time.After(time.Until(rd.last.Add(rd.interval))):
		case <-ctx.Done():
			rd.n.selected-- // not attempted
			return
		}
	}
	rd.last = time.Now()
	ack, err := rd.publish(ctx, r)
	switch {
	case err != nil:
		rd.n.failed++
		rd.line(e.Seq, outFailed, r.Subject, 0, err.Error())
		return
	case ack.Duplicate && r.OriginalSeq > 0 && ack.Sequence == r.OriginalSeq && ack.Stream == r.OriginalStream:
		rd.n.blocked++
		rd.line(e.Seq, outBlocked, r.Subject, ack.Sequence, "the original message is still inside the stream's duplicate window")
		return
	}
	outcome := outRedriven
	if ack.Duplicate {
		outcome = outDuplicate
		rd.n.duplicate++
	} else {
		rd.n.redriven++
	}
	if rd.purge {
		// Only now: the republish was acknowledged by its stream.
		if err := rd.api.DeleteMsg(ctx, rd.d.Stream, e.Seq); err != nil {
			rd.n.purgeFailed++
			rd.line(e.Seq, outPurgeFailed, r.Subject, ack.Sequence, err.Error())
			return
		}
		rd.n.purged++
	}
	rd.line(e.Seq, outcome, r.Subject, ack.Sequence, "")
}

// publish JetStream-publishes r and waits for its PubAck within the
// dead_letter.publish_timeout_ms; a refused publish fails at once.
func (rd *redriver) publish(ctx context.Context, r *dlq.Republish) (*jetstream.PubAck, error) {
	pctx, cancel := context.WithTimeout(ctx, rd.timeout)
	defer cancel()
	pctx, stop := rd.api.Watch(pctx, r.Subject)
	defer stop()
	msg := &nats.Msg{Subject: r.Subject, Data: r.Data, Header: nats.Header(r.Header)}
	ack, err := rd.js.PublishMsg(pctx, msg)
	if err != nil {
		err = jsapi.Explain(pctx, err)
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no PubAck within %v", rd.timeout)
		}
		return nil, err
	}
	return ack, nil
}

func (rd *redriver) line(dlqSeq uint64, outcome, subj string, seq uint64, reason string) {
	if rd.asJSON {
		var s, e any
		if seq > 0 {
			s = seq
		}
		if reason != "" {
			e = reason
		}
		fmt.Fprintf(rd.env.Stdout, "%s\n", jsonx.Marshal(map[string]any{
			"dlq_seq": dlqSeq, "outcome": outcome, "subject": nullable(subj), "seq": s, "error": e}, jsonx.UTF8))
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %s", outcome, dlqSeq, dash(subj))
	if seq > 0 {
		fmt.Fprintf(&b, " seq=%d", seq)
	}
	if reason != "" {
		b.WriteString(": " + dlq.Short(reason, 300))
	}
	fmt.Fprintln(rd.env.Stdout, b.String())
}

// summary prints the last line and returns the exit code: 0 only when
// every selected entry was republished (and, with --purge, deleted).
func (rd *redriver) summary(interrupted bool) int {
	n := rd.n
	if rd.dryRun {
		if rd.asJSON {
			fmt.Fprintf(rd.env.Stdout, "%s\n", jsonx.Marshal(map[string]any{"dry_run": true, "selected": n.selected,
				"would_redrive": n.would, "refused": n.refused, "complete": !interrupted}, jsonx.UTF8))
		} else {
			fmt.Fprintf(rd.env.Stdout, "Dry run complete; %d DLQ entries would be redriven, %d refused.\n", n.would, n.refused)
		}
		if n.refused > 0 || interrupted {
			return exitRuntime
		}
		return exitOK
	}
	complete := !interrupted && n.redriven+n.duplicate == n.selected && (!rd.purge || n.purged == n.selected)
	if rd.asJSON {
		fmt.Fprintf(rd.env.Stdout, "%s\n", jsonx.Marshal(map[string]any{"complete": complete, "selected": n.selected,
			"redriven": n.redriven, "duplicate": n.duplicate, "blocked": n.blocked, "refused": n.refused,
			"failed": n.failed, "purged": n.purged}, jsonx.UTF8))
	} else {
		word := "complete"
		if !complete {
			word = "incomplete"
		}
		fmt.Fprintf(rd.env.Stdout, "Redrive %s: selected=%d redriven=%d duplicate=%d blocked=%d refused=%d failed=%d purged=%d\n",
			word, n.selected, n.redriven, n.duplicate, n.blocked, n.refused, n.failed, n.purged)
	}
	if complete {
		return exitOK
	}
	return exitRuntime
}
