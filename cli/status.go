package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/ops"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/spool"
	"github.com/nats-sinks/nats-sink/telemetry"
)

const statusUsage = "CONFIG [--json] [--watch [--interval S]] [--skip-sink] [--max-lag N] [--max-lag-seconds S] [--max-dlq N] [--dlq-stream NAME]"

// runStatus is `nats-sink status` (docs/operations.md): the consumer's
// state and lag, the DLQ depth, the sink's health check and the readiness
// of a running process, read-only.
func runStatus(env *Env, args []string) int {
	fs := newFlags(env, "status", statusUsage)
	asJSON := fs.Bool("json", false, "print one JSON object per refresh")
	watch := fs.Bool("watch", false, "refresh until SIGINT (in place on a terminal)")
	interval := fs.Int("interval", 5, "seconds between --watch refreshes (1..3600)")
	skipSink := fs.Bool("skip-sink", false, "do not open the sink")
	maxLag := fs.Int64("max-lag", -1, "unhealthy when more than N messages are not yet acknowledged")
	maxLagSeconds := fs.Float64("max-lag-seconds", -1, "unhealthy when the oldest unacknowledged message is older than S seconds")
	maxDLQ := fs.Int64("max-dlq", -1, "unhealthy when the DLQ subject holds more than N entries")
	dlqStream := fs.String("dlq-stream", "", "the stream holding dead_letter.subject, when several capture it")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "Configuration error: %s\n", fmt.Sprintf(format, a...))
		return exitConfig
	}
	var lim ops.Limits
	switch {
	case given["interval"] && !*watch:
		return usageErr("--interval: only with --watch")
	case *interval < 1 || *interval > 3600:
		return usageErr("--interval: must be between 1 and 3600 (got %d)", *interval)
	case given["max-lag"] && *maxLag < 0:
		return usageErr("--max-lag: must be at least 0 (got %d)", *maxLag)
	case given["max-lag-seconds"] && *maxLagSeconds < 0:
		return usageErr("--max-lag-seconds: must be at least 0 (got %v)", *maxLagSeconds)
	case given["max-dlq"] && *maxDLQ < 0:
		return usageErr("--max-dlq: must be at least 0 (got %d)", *maxDLQ)
	}
	if given["max-lag"] {
		lim.MaxLag = maxLag
	}
	if given["max-lag-seconds"] {
		lim.MaxLagSeconds = maxLagSeconds
	}
	if given["max-dlq"] {
		n := uint64(*maxDLQ)
		lim.MaxDLQ = &n
	}
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return code
	}

	st := &statusRun{env: env, cfg: cfg, limits: lim, dlqStream: *dlqStream, skipSink: *skipSink}
	defer st.close()
	ctx, stop := env.Signals(context.Background())
	defer stop()
	tty := *watch && isTerminal(env.Stdout)
	lines := 0 // lines of the previous refresh, redrawn in place on a terminal
	for {
		s, err := st.refresh(ctx)
		if err != nil {
			fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
			return exitConfig
		}
		if *watch && lines > 0 && ctx.Err() != nil {
			// SIGINT arrived during this refresh: its checks were cut off
			// ("context canceled"), so it is not shown and the last whole
			// refresh's code stands.
			return code
		}
		code = exitOK
		if !s.Healthy() {
			code = exitRuntime
		}
		var out []byte
		if *asJSON {
			out = append(jsonx.Marshal(statusJSON(cfg, s), jsonx.UTF8), '\n')
		} else {
			out = renderStatus(cfg, s)
		}
		if tty && lines > 0 {
			fmt.Fprintf(env.Stdout, "\x1b[%dF\x1b[J", lines) // back to the block's first line, clear below
		} else if *watch && lines > 0 && !*asJSON {
			fmt.Fprintln(env.Stdout)
		}
		env.Stdout.Write(out)
		lines = bytes.Count(out, []byte("\n"))
		if !*watch {
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case <-time.After(time.Duration(*interval) * time.Second):
		}
	}
}

// statusRun holds what lives across --watch refreshes: the connection and
// the opened sink.
type statusRun struct {
	env       *Env
	cfg       *config.Config
	limits    ops.Limits
	dlqStream string
	skipSink  bool

	conn *opsConn
	sink sink.Sink
}

// refresh runs every check once. It returns an error only for a
// configuration problem found on the way (a secret that cannot be
// resolved): exit 2.
func (st *statusRun) refresh(ctx context.Context) (*ops.Status, error) {
	in := ops.StatusInput{Config: st.cfg, DLQStream: st.dlqStream, Limits: st.limits}
	if st.conn == nil {
		conn, err := connectOps(st.env, st.cfg)
		if errors.Is(err, sink.ErrConfig) {
			return nil, err
		}
		st.conn, in.ConnErr = conn, err
	}
	if st.conn != nil {
		in.API, in.Connected, in.Server = st.conn.api, st.conn.nc.IsConnected(), st.conn.nc.ConnectedUrlRedacted()
	}
	if !st.skipSink {
		in.Sink = st.checkSink
		if st.sink == nil {
			// Opened once and kept across refreshes, as test-sink opens
			// it: configuration problems are exit 2 here too.
			if err := st.openSink(ctx); errors.Is(err, sink.ErrConfig) {
				return nil, err
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return ops.GatherStatus(rctx, in), nil
}

func (st *statusRun) openSink(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A NATS republish sink with connection null reuses the connection.
	conn := func() (*nats.Conn, error) {
		if st.conn == nil {
			return nil, errors.New("not connected to NATS")
		}
		return st.conn.nc, nil
	}
	s, err := pipeline.OpenSink(octx, st.cfg, nil, telemetry.NewLogger(st.env.Stderr, st.cfg.Logging.Format, "ERROR"), conn, config.Env(st.env.Getenv))
	if err != nil {
		return err
	}
	st.sink = s
	return nil
}

// checkSink opens the sink when it is not open yet, and runs its health
// check.
func (st *statusRun) checkSink(ctx context.Context) (string, error) {
	start := time.Now()
	if st.sink == nil {
		if err := st.openSink(ctx); err != nil {
			return "open failed", err
		}
	}
	detail, err := "opened; the sink has no health check", error(nil)
	if hc, ok := st.sink.(sink.HealthChecker); ok {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = hc.Healthcheck(hctx)
		cancel()
		detail = "health check failed"
		if err == nil {
			detail = fmt.Sprintf("health check passed in %d ms", time.Since(start).Milliseconds())
		}
	}
	// A spool also shows what it holds against its limits, full or not.
	if sp, ok := st.sink.(interface{ Usage() (spool.Usage, error) }); ok {
		if u, uerr := sp.Usage(); uerr == nil {
			detail += fmt.Sprintf(" · usage %d/%d records · %d/%d bytes", u.Records, u.MaxRecords, u.Bytes, u.MaxBytes)
		} else if err == nil {
			err = uerr
		}
	}
	return detail, err
}

func (st *statusRun) close() {
	if st.sink != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st.sink.Stop(ctx)
		cancel()
	}
	if st.conn != nil {
		st.conn.Close()
	}
}

// renderStatus is the table of one refresh.
func renderStatus(cfg *config.Config, s *ops.Status) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "nats-sink status — stream %s, consumer %s, sink %s\n", cfg.NATS.Stream, cfg.NATS.Consumer, cfg.Sink.Type)
	t := &table{}
	t.add("CHECK", "STATE", "DETAIL")
	errText := func(err error) string {
		if err == nil {
			return "-"
		}
		return oneLine(err.Error())
	}

	switch s.NATS.State {
	case ops.StateOK:
		t.add("nats", s.NATS.State, "connected")
	default:
		t.add("nats", s.NATS.State, errText(s.NATS.Err))
	}
	c := s.Consumer
	switch c.State {
	case ops.StateOK:
		t.add("consumer", c.State, fmt.Sprintf("pending %d · ack pending %d · redelivered %d · waiting %d",
			*c.NumPending, *c.NumAckPending, *c.NumRedelivered, *c.NumWaiting))
	case ops.StateSkipped:
		t.add("consumer", c.State, "nats.durable is false: an ephemeral consumer has no state to read")
	case ops.StateUnknown:
		t.add("consumer", c.State, "NATS not connected")
	default:
		t.add("consumer", c.State, errText(c.Err))
	}
	for _, row := range []struct {
		name string
		si   *ops.SeqInfo
	}{{"ack floor", s.AckFloor}, {"delivered", s.Delivered}} {
		if row.si == nil {
			continue
		}
		last := "never"
		if row.si.LastActive != nil {
			last = tableTime(*row.si.LastActive)
		}
		t.add(row.name, ops.StateInfo, fmt.Sprintf("stream %d · consumer %d · %s", row.si.Stream, row.si.Consumer, last))
	}
	l := s.Lag
	switch {
	case l.Messages != nil:
		age := "age unknown"
		if l.Seconds != nil {
			age = strconv.FormatFloat(*l.Seconds, 'f', 1, 64) + " s"
		}
		t.add("lag", l.State, fmt.Sprintf("%d messages · %s", *l.Messages, age))
	case l.State == ops.StateSkipped:
		t.add("lag", l.State, "no consumer state")
	default:
		t.add("lag", l.State, "consumer state unknown")
	}
	d := s.DLQ
	switch {
	case d.State == ops.StateSkipped:
		t.add("dlq", d.State, "no dead_letter.subject")
	case d.Entries != nil:
		t.add("dlq", d.State, fmt.Sprintf("%s on %s: %d entries", d.Subject, d.Stream, *d.Entries))
	case d.Err != nil:
		t.add("dlq", d.State, d.Subject+": "+errText(d.Err))
	default:
		t.add("dlq", d.State, d.Subject+": NATS not connected")
	}
	sk := s.Sink
	switch {
	case sk.State == ops.StateSkipped:
		t.add("sink", sk.State, "--skip-sink")
	case sk.Err != nil:
		t.add("sink", sk.State, sk.Detail+": "+errText(sk.Err))
	default:
		t.add("sink", sk.State, sk.Detail)
	}
	p := s.Process
	if p.State == ops.StateSkipped {
		t.add("process", p.State, "metrics.listen not set")
	} else {
		t.add("process", p.State, fmt.Sprintf("%s (%s)", p.Readiness, p.Address))
	}
	t.write(&b)
	if failed := s.Failed(); len(failed) > 0 {
		fmt.Fprintf(&b, "status: unhealthy (%s)\n", strings.Join(failed, ", "))
	} else {
		b.WriteString("status: healthy\n")
	}
	return b.Bytes()
}

// oneLine keeps an error on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// statusJSON is the --json object of one refresh.
func statusJSON(cfg *config.Config, s *ops.Status) map[string]any {
	errOrNil := func(err error) any {
		if err == nil {
			return nil
		}
		return err.Error()
	}
	num := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	seq := func(si *ops.SeqInfo) any {
		if si == nil {
			return map[string]any{"stream_seq": nil, "consumer_seq": nil, "last_active": nil}
		}
		var last any
		if si.LastActive != nil {
			last = record.ISO(*si.LastActive)
		}
		return map[string]any{"stream_seq": si.Stream, "consumer_seq": si.Consumer, "last_active": last}
	}
	var lagSeconds, dlqEntries, sinkMS any
	if s.Lag.Seconds != nil {
		lagSeconds = *s.Lag.Seconds
	}
	if s.DLQ.Entries != nil {
		dlqEntries = *s.DLQ.Entries
	}
	if s.Sink.Duration != nil {
		sinkMS = s.Sink.Duration.Milliseconds()
	}
	var readiness any
	if s.Process.Readiness != "" {
		readiness = s.Process.Readiness
	}
	return map[string]any{
		"nats": map[string]any{"state": s.NATS.State, "server": nullable(s.NATS.Server), "error": errOrNil(s.NATS.Err)},
		"consumer": map[string]any{"state": s.Consumer.State, "num_pending": num(s.Consumer.NumPending),
			"num_ack_pending": num(s.Consumer.NumAckPending), "num_redelivered": num(s.Consumer.NumRedelivered),
			"num_waiting": num(s.Consumer.NumWaiting), "error": errOrNil(s.Consumer.Err)},
		"ack_floor": seq(s.AckFloor),
		"delivered": seq(s.Delivered),
		"lag":       map[string]any{"state": s.Lag.State, "messages": num(s.Lag.Messages), "seconds": lagSeconds},
		"dlq": map[string]any{"state": s.DLQ.State, "subject": nullable(s.DLQ.Subject), "stream": nullable(s.DLQ.Stream),
			"entries": dlqEntries},
		"sink": map[string]any{"state": s.Sink.State, "type": cfg.Sink.Type, "detail": nullable(s.Sink.Detail),
			"duration_ms": sinkMS, "error": errOrNil(s.Sink.Err)},
		"process":    map[string]any{"state": s.Process.State, "address": nullable(s.Process.Address), "readiness": readiness},
		"healthy":    s.Healthy(),
		"checked_at": record.ISO(s.CheckedAt),
	}
}
