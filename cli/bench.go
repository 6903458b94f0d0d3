package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/embedded"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	"github.com/nats-sinks/nats-sink/sinks/segments"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// benchOptions are the bench command's flags (docs/performance.md).
type benchOptions struct {
	server       string
	configPath   string
	messages     int
	payloadBytes int
	batchSize    int
	inFlight     int
	sinks        []string
	encrypt      bool
	format       string
	keep         bool
	rounds       int
	replay       bool
	// integrity lists the integrity variants each pipeline phase runs in
	// (bench_integrity.go); empty means off only.
	integrity []string
	// bareSQL selects the bare SQL phases (bench_sql.go): "best", "all",
	// "off" or a comma-separated list of methods.
	bareSQL string
	keys    *benchKeys
	// versus holds the comparisons of phases (by name) with others.
	versus map[string]benchVersus
	// cpu holds each phase's CPU per round (bench_cpu.go).
	mu  sync.Mutex
	cpu map[string][]cpuSample

	// cfg is the --config file, loaded; explicit records which flags were
	// given, so that --batch-size and --in-flight override the file only
	// when set.
	cfg      *config.Config
	explicit map[string]bool
}

// benchRow is one line of the bench table.
type benchRow struct {
	Phase   string
	Msgs    int
	Seconds float64
}

// benchVersus names the phases of the same round a phase is compared
// with: its ratio is its rate to the fastest of them (or, with Slowest,
// the slowest), printed below the table. It depends on the phase's name
// only, so one map serves every round.
type benchVersus struct {
	Names   []string
	Slowest bool
}

func (r benchRow) rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Msgs) / r.Seconds
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runBench(env *Env, args []string) int {
	fs := newFlags(env, "bench", "[flags]")
	var o benchOptions
	var sinks stringList
	fs.StringVar(&o.server, "server", "embedded", "target server URL, or embedded")
	fs.StringVar(&o.configPath, "config", "", "use this configuration's connection, sink, delivery and encryption")
	fs.IntVar(&o.messages, "messages", 100000, "messages published")
	fs.IntVar(&o.payloadBytes, "payload-bytes", 256, "JSON payload size in bytes")
	fs.IntVar(&o.batchSize, "batch-size", 500, "delivery.batch_size")
	fs.IntVar(&o.inFlight, "in-flight", 4, "delivery.max_in_flight_batches")
	fs.Var(&sinks, "sink", "null, file, sqlite or segments, or fanout-null-null / fanout-file-file / fanout-file-sqlite (a fanout sink over two required targets: two null sinks, two fsync'ed file sinks, or a file sink and SQLite; each target also runs alone) (with --config: null or its sink type); repeatable, one pipeline phase each")
	fs.BoolVar(&o.encrypt, "encrypt", false, "encrypt all subjects with a random key")
	fs.StringVar(&o.format, "format", "text", "text or json")
	fs.BoolVar(&o.keep, "keep", false, "keep the stream and temporary files")
	fs.IntVar(&o.rounds, "rounds", 1, "repeat every phase this many times, each round on a fresh stream, and report medians")
	fs.BoolVar(&o.replay, "replay", false, "after each pipeline phase, replay the whole stream into a fresh destination of that sink (nats-sink replay)")
	var integrity stringList
	fs.Var(&integrity, "integrity", "run every pipeline phase once per variant: off, hmac, ed25519, custody or all (comma-separated or repeatable; the publisher then signs every message)")
	fs.StringVar(&o.bareSQL, "bare-sql", "best", "bare phases of a SQL sink (sqlite, postgres, mysql): best, all, off, or methods (copy, unnest, values, values100, prepared), comma-separated; --keep keeps the bare table")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (server included when embedded) to FILE")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	o.explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.explicit[f.Name] = true })
	if o.configPath != "" {
		cfg, code := loadConfig(env, o.configPath)
		if cfg == nil {
			return code
		}
		o.cfg = cfg
		if !o.explicit["batch-size"] {
			o.batchSize = cfg.Delivery.BatchSize
		}
		if !o.explicit["in-flight"] {
			o.inFlight = cfg.Delivery.MaxInFlightBatches
		}
	}
	for _, v := range integrity {
		for _, x := range strings.Split(v, ",") {
			if x = strings.TrimSpace(x); x != "" && !slices.Contains(o.integrity, x) {
				o.integrity = append(o.integrity, x)
			}
		}
	}
	o.sinks = sinks
	if len(o.sinks) == 0 {
		o.sinks = []string{"null"}
		if o.cfg != nil {
			o.sinks = []string{o.cfg.Sink.Type}
		}
	}
	if err := o.check(); err != nil || len(pos) > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments: %s", strings.Join(pos, " "))
		}
		fmt.Fprintf(env.Stderr, "nats-sink bench: %v\n", err)
		fs.Usage()
		return exitConfig
	}
	o.sinks = withFanoutTargets(o.sinks)
	if needsKeys(o.integrity) {
		o.keys = newBenchKeys()
	}
	ctx, stop := env.Signals(context.Background())
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
			return exitRuntime
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
			return exitRuntime
		}
		defer pprof.StopCPUProfile()
	}
	rounds, header, err := o.run(ctx, env)
	if err != nil {
		if errors.Is(err, sink.ErrConfig) {
			fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
			return exitConfig
		}
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}
	printBench(env.Stdout, o.format, header, rounds, o.versus, o.cpuPerMessage)
	return exitOK
}

func (o *benchOptions) check() error {
	switch {
	case o.messages < 1:
		return errors.New("--messages must be at least 1")
	case o.payloadBytes < 16 || o.payloadBytes > 8<<20:
		return errors.New("--payload-bytes must be between 16 and 8388608")
	case o.batchSize < 1 || o.batchSize > 10000:
		return errors.New("--batch-size must be between 1 and 10000")
	case o.inFlight < 1 || o.inFlight > 64:
		return errors.New("--in-flight must be between 1 and 64")
	case o.format != "text" && o.format != "json":
		return errors.New("--format must be text or json")
	case o.rounds < 1 || o.rounds > 100:
		return errors.New("--rounds must be between 1 and 100")
	}
	for _, s := range o.sinks {
		switch {
		case o.cfg != nil && s != "null" && s != o.cfg.Sink.Type:
			return fmt.Errorf("--sink with --config must be null or the configuration's sink type %q (got %q)", o.cfg.Sink.Type, s)
		case o.cfg == nil && s != "null" && s != "file" && s != "sqlite" && s != "segments" && fanoutTargets(s) == nil:
			return fmt.Errorf("--sink must be null, file, sqlite or segments, or fanout-null-null, fanout-file-file or fanout-file-sqlite (got %q)", s)
		}
	}
	for _, v := range o.integrity {
		if !slices.Contains(integrityVariants, v) {
			return fmt.Errorf("--integrity must be off, hmac, ed25519, custody or all (got %q)", v)
		}
	}
	if _, err := bareMethods(o.bareSQL); err != nil {
		return err
	}
	return nil
}

// benchPayload returns a JSON object of exactly n bytes.
func benchPayload(i, n int) []byte {
	head := fmt.Appendf(nil, `{"i":%d,"pad":"`, i)
	pad := n - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	b := append(head, strings.Repeat("x", pad)...)
	return append(b, '"', '}')
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// benchTarget is the stream a bench run uses.
type benchTarget struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	subject string // prefix; messages go to subject + ".m"
	tmp     string
	where   string
}

// run connects (or starts the embedded server) once and runs o.rounds
// rounds; it returns each round's rows and the table's title.
func (o *benchOptions) run(ctx context.Context, env *Env) ([][]benchRow, string, error) {
	tmp, err := os.MkdirTemp("", "nats-sink-bench-")
	if err != nil {
		return nil, "", err
	}
	if !o.keep {
		defer os.RemoveAll(tmp)
	}
	t := &benchTarget{tmp: tmp}
	url := o.server
	t.where = url
	var natsOpts []nats.Option
	if o.cfg != nil && !o.explicit["server"] {
		// --config: its connection keys, secrets resolved now.
		url = strings.Join(o.cfg.NATS.Servers(), ",")
		t.where = redactURL(url)
		m, _ := telemetry.NewMetrics(nil, "nats_sinks") // unexported: counts connection events only
		natsOpts, err = pipeline.NATSOptions(&o.cfg.NATS, config.Env(env.Getenv), telemetry.NewLogger(env.Stderr, "text", "ERROR"), m)
		if err != nil {
			return nil, "", err
		}
	} else if o.server == "embedded" {
		s, err := embedded.Start(tmp+"/nats", -1)
		if err != nil {
			return nil, "", fmt.Errorf("start embedded nats-server: %w", err)
		}
		defer s.Shutdown()
		url = s.ClientURL()
		t.where = "embedded NATS"
	}
	t.nc, err = nats.Connect(url, append(natsOpts, nats.Name("nats-sink bench"))...)
	if err != nil {
		return nil, "", fmt.Errorf("connect to %s: %w", redactURL(url), err)
	}
	defer t.nc.Close()
	if o.cfg != nil {
		t.js, err = pipeline.NewJetStream(t.nc, &o.cfg.NATS)
	} else {
		t.js, err = jetstream.New(t.nc)
	}
	if err != nil {
		return nil, "", err
	}

	header := fmt.Sprintf("nats-sink bench — %s, %d msgs × %d B, batch %d, in-flight %d, sink %s",
		t.where, o.messages, o.payloadBytes, o.batchSize, o.inFlight, strings.Join(o.sinks, ","))
	if o.cfg != nil && o.cfg.Delivery.AckConfirmation.Enabled {
		// The pipelines then wait for each ACK's confirmation while the
		// ceiling still plain-ACKs: say so, since it changes every ratio.
		header += ", ack confirmation on"
	}
	if len(o.integrity) > 0 {
		header += ", integrity " + strings.Join(o.integrity, ",")
	}
	if o.rounds > 1 {
		header += fmt.Sprintf(", %d rounds (medians)", o.rounds)
	}
	var rounds [][]benchRow
	for r := range o.rounds {
		rows, err := o.round(ctx, env, t, r)
		if err != nil {
			return nil, "", err
		}
		rounds = append(rounds, rows)
	}
	return rounds, header, nil
}

// round runs every phase once on a fresh stream: publish, the ceiling,
// then each pipeline (after the bare file loop for the file sink). A fresh
// stream per round gives every round the same work: on the same messages,
// a SQL sink's second round would update the rows the first one inserted.
func (o *benchOptions) round(ctx context.Context, env *Env, t *benchTarget, r int) ([]benchRow, error) {
	id := randomHex(8)
	t.stream = "NATS_SINKS_BENCH_" + strings.ToUpper(id)
	t.subject = "nats-sinks-bench." + id
	if _, err := t.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: t.stream, Subjects: []string{t.subject + ".>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		return nil, fmt.Errorf("create stream %s: %w", t.stream, err)
	}
	if !o.keep {
		defer t.js.DeleteStream(context.WithoutCancel(ctx), t.stream)
	}
	var rows []benchRow

	row, err := o.publish(ctx, t)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row)

	row, err = o.ceiling(ctx, t)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row)
	limit := 10*time.Duration(row.Seconds*float64(time.Second)) + 30*time.Second

	variants := o.integrity
	if len(variants) == 0 {
		variants = []string{"off"}
	}
	for i, s := range o.sinks {
		if s == "file" {
			row, err := o.bareFiles(ctx, t)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		bare, err := o.bareSQLPhases(ctx, env, t, s)
		if err != nil {
			return nil, err
		}
		rows = append(rows, bare...)
		for j, v := range variants {
			row, err := o.pipeline(ctx, env, t, s, v, fmt.Sprintf("%d-%d", r*len(o.sinks)+i, j), limit)
			if err != nil {
				return nil, err
			}
			var vs benchVersus
			switch {
			case v != "off" && slices.Contains(variants, "off"):
				vs.Names = []string{phaseName(s, "off")}
			case len(bare) > 0:
				for _, b := range bare {
					vs.Names = append(vs.Names, b.Phase)
				}
			case fanoutTargets(s) != nil:
				for _, target := range fanoutTargets(s) {
					vs.Names = append(vs.Names, phaseName(target, v))
				}
				vs.Slowest = true
			}
			if len(vs.Names) > 0 {
				if o.versus == nil {
					o.versus = map[string]benchVersus{}
				}
				o.versus[row.Phase] = vs
			}
			rows = append(rows, row)
		}
		if o.replay {
			row, err := o.replayPhase(ctx, env, t, s, r*len(o.sinks)+i)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// publish sends o.messages messages with async publish and waits for every
// PubAck. It waits for the outstanding PubAcks every 2,000 messages: the
// client refuses to hold more than 4,000 (and a slow disk makes the server
// fall that far behind).
func (o *benchOptions) publish(ctx context.Context, t *benchTarget) (benchRow, error) {
	start := time.Now()
	wait := func() error {
		select {
		case <-t.js.PublishAsyncComplete():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Minute):
			return errors.New("publish: PubAcks did not arrive within 5 minutes")
		}
	}
	previous := ""
	for i := 0; i < o.messages; i++ {
		if i > 0 && i%2000 == 0 {
			if err := wait(); err != nil {
				return benchRow{}, err
			}
		}
		data := benchPayload(i, o.payloadBytes)
		msg := &nats.Msg{Subject: t.subject + ".m", Data: data}
		if o.keys != nil {
			// Signed, with the chain link of the message before (none
			// for the first).
			msg.Header = o.keys.headers(msg.Subject, data, previous)
			previous = chainLink(data)
		}
		if _, err := t.js.PublishMsgAsync(msg); err != nil {
			return benchRow{}, fmt.Errorf("publish: %w", err)
		}
	}
	if err := wait(); err != nil {
		return benchRow{}, err
	}
	return benchRow{"publish", o.messages, time.Since(start).Seconds()}, nil
}

// ceiling is the raw consume+ACK loop: fetch a batch, plain-ACK each message,
// no envelope or sink work. It is the upper bound for any pipeline.
func (o *benchOptions) ceiling(ctx context.Context, t *benchTarget) (benchRow, error) {
	c, err := t.js.CreateOrUpdateConsumer(ctx, t.stream, jetstream.ConsumerConfig{
		Durable: "bench-ceiling", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: o.batchSize * (o.inFlight + 1),
	})
	if err != nil {
		return benchRow{}, fmt.Errorf("create ceiling consumer: %w", err)
	}
	mark := markCPU(nil)
	start := time.Now()
	acked := 0
	for acked < o.messages {
		if err := ctx.Err(); err != nil {
			return benchRow{}, err
		}
		batch, err := c.Fetch(min(o.batchSize, o.messages-acked), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return benchRow{}, fmt.Errorf("ceiling fetch: %w", err)
		}
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				return benchRow{}, fmt.Errorf("ceiling ack: %w", err)
			}
			acked++
		}
	}
	if err := t.nc.Flush(); err != nil {
		return benchRow{}, err
	}
	elapsed := time.Since(start)
	o.noteCPU("consume+ack ceiling", mark)
	return benchRow{"consume+ack ceiling", o.messages, elapsed.Seconds()}, nil
}

// bareFiles creates the same number of files the file sink would, the same
// way, with no NATS: the disk's bound for the file pipeline.
func (o *benchOptions) bareFiles(ctx context.Context, t *benchTarget) (benchRow, error) {
	dir, err := os.MkdirTemp(t.tmp, "bare-")
	if err != nil {
		return benchRow{}, err
	}
	size := recordSize(t, o.payloadBytes, o.keys)
	fsync := true
	if o.cfg != nil {
		if fc, ok := o.cfg.Sink.Opener.(file.Config); ok {
			fsync = fc.Fsync
		}
	}
	start := time.Now()
	if err := file.BareLoop(ctx, dir, o.messages, size, fsync); err != nil {
		return benchRow{}, fmt.Errorf("bare file loop: %w", err)
	}
	return benchRow{"files (bare)", o.messages, time.Since(start).Seconds()}, nil
}

// recordSize is the size of the file record the file sink writes for a bench
// message (signed when keys is set), so the bare loop writes as many bytes
// as the sink does.
func recordSize(t *benchTarget, payloadBytes int, keys *benchKeys) int {
	reply := fmt.Sprintf("$JS.ACK.%s.bench-pipeline-0-file.1.100000.100000.%d.0", t.stream, time.Now().UnixNano())
	msg := intake.Message{Subject: t.subject + ".m", Reply: reply, Data: benchPayload(100000, payloadBytes)}
	if keys != nil {
		msg.Header = keys.headers(msg.Subject, msg.Data, chainLink(msg.Data))
	}
	e := intake.Build(msg, nil, time.Now())
	p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
	if err != nil {
		return payloadBytes
	}
	return len(jsonx.Marshal(record.FileRecord(e, p, true, time.Now()), jsonx.UTF8)) + 1
}

// benchPhase is one phase over all rounds.
type benchPhase struct {
	Phase string
	Msgs  int
	// Seconds and Rate are the medians over the rounds.
	Seconds, Rate float64
	// Percent is the median over the rounds of the phase's rate as a
	// percentage of the same round's ceiling (NaN for publish): each ratio
	// compares phases run minutes apart at most, so machine noise moves
	// both sides alike.
	Percent float64
	// Percents holds each round's percentage.
	Percents []float64
	// Versus and Slowest are the phase's benchVersus; Ratio is the median
	// over the rounds of the phase's rate to that round's fastest (or
	// slowest) Versus phase, NaN without one; Ratios holds each round's.
	Versus  []string
	Slowest bool
	Ratio   float64
	Ratios  []float64
}

// summarise reduces rounds (each with the same phases in the same order)
// to one benchPhase per phase.
func summarise(rounds [][]benchRow) []benchPhase { return summariseVersus(rounds, nil) }

// summariseVersus is summarise with each phase's ratio to the phases
// versus names for it.
func summariseVersus(rounds [][]benchRow, versus map[string]benchVersus) []benchPhase {
	var out []benchPhase
	for i, first := range rounds[0] {
		vs := versus[first.Phase]
		p := benchPhase{Phase: first.Phase, Msgs: first.Msgs, Percent: math.NaN(),
			Versus: vs.Names, Slowest: vs.Slowest, Ratio: math.NaN()}
		var secs, rates []float64
		for _, rows := range rounds {
			r := rows[i]
			secs, rates = append(secs, r.Seconds), append(rates, r.rate())
			if c := ceilingRate(rows); r.Phase != "publish" && c > 0 {
				p.Percents = append(p.Percents, 100*r.rate()/c)
			}
			if b := versusRate(rows, vs.Names, vs.Slowest); b > 0 {
				p.Ratios = append(p.Ratios, r.rate()/b)
			}
		}
		p.Seconds, p.Rate = median(secs), median(rates)
		if len(p.Percents) > 0 {
			p.Percent = median(p.Percents)
		}
		if len(p.Ratios) > 0 {
			p.Ratio = median(p.Ratios)
		}
		out = append(out, p)
	}
	return out
}

// versusRate is the rate of the fastest (or, with slowest, the slowest)
// of the named phases in rows, 0 when none is there.
func versusRate(rows []benchRow, names []string, slowest bool) float64 {
	best := 0.0
	for _, r := range rows {
		if !slices.Contains(names, r.Phase) || r.rate() <= 0 {
			continue
		}
		if best == 0 || (slowest && r.rate() < best) || (!slowest && r.rate() > best) {
			best = r.rate()
		}
	}
	return best
}

// versusText describes what a phase's ratio compares it with.
func versusText(p benchPhase) string {
	if len(p.Versus) == 1 {
		return p.Versus[0]
	}
	which := "fastest"
	if p.Slowest {
		which = "slowest"
	}
	return which + " of " + strings.Join(p.Versus, ", ")
}

func ceilingRate(rows []benchRow) float64 {
	for _, r := range rows {
		if r.Phase == "consume+ack ceiling" {
			return r.rate()
		}
	}
	return 0
}

// median returns the middle value of xs (the mean of the two middle ones
// for an even count); xs is not modified.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// printBench writes the table: one row per phase, the medians of the
// rounds, and with more than one round each round's % of its ceiling.
func printBench(w io.Writer, format, header string, rounds [][]benchRow, versus map[string]benchVersus, cpu cpuFunc) {
	phases := summariseVersus(rounds, versus)
	if cpu == nil {
		cpu = func(string, int) (float64, float64, bool, bool) { return 0, 0, false, false }
	}
	if format == "json" {
		var list []any
		for _, p := range phases {
			item := map[string]any{"phase": p.Phase, "msgs": p.Msgs, "seconds": p.Seconds, "msgs_per_second": p.Rate}
			if !math.IsNaN(p.Percent) {
				item["percent_of_ceiling"] = p.Percent
			}
			if len(rounds) > 1 && len(p.Percents) > 0 {
				each := make([]any, len(p.Percents))
				for i, v := range p.Percents {
					each[i] = v
				}
				item["rounds_percent_of_ceiling"] = each
			}
			if !math.IsNaN(p.Ratio) {
				each := make([]any, len(p.Ratios))
				for i, v := range p.Ratios {
					each[i] = v
				}
				item["ratio"] = map[string]any{"versus": versusText(p), "median": p.Ratio, "rounds": each}
			}
			if self, db, hasDB, ok := cpu(p.Phase, p.Msgs); ok {
				c := map[string]any{"bench_process": self}
				if hasDB {
					c["database_processes"] = db
				}
				item["cpu_us_per_message"] = c
			}
			list = append(list, item)
		}
		w.Write(append(jsonx.Marshal(map[string]any{"title": header, "rows": list}, jsonx.UTF8), '\n'))
		return
	}
	fmt.Fprintln(w, header)
	title := fmt.Sprintf("%-32s %-8s %-9s %-10s %s", "PHASE", "MSGS", "SECONDS", "MSGS/S", "% OF CEILING")
	if len(rounds) > 1 {
		title += "   ROUNDS (% OF CEILING)"
	}
	fmt.Fprintln(w, title)
	for _, p := range phases {
		pct := "-"
		if !math.IsNaN(p.Percent) {
			pct = fmt.Sprintf("%.1f", p.Percent)
		}
		line := fmt.Sprintf("%-32s %-8d %-9.3f %-10.0f %s", p.Phase, p.Msgs, p.Seconds, p.Rate, pct)
		if len(rounds) > 1 && len(p.Percents) > 0 && p.Phase != "consume+ack ceiling" {
			each := make([]string, len(p.Percents))
			for i, v := range p.Percents {
				each[i] = fmt.Sprintf("%.1f", v)
			}
			line = fmt.Sprintf("%-77s %s", line, strings.Join(each, " "))
		}
		fmt.Fprintln(w, line)
	}
	first := true
	for _, p := range phases {
		if math.IsNaN(p.Ratio) {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nRATIO (median of rounds' rate ratios)")
			first = false
		}
		line := fmt.Sprintf("%.2f× %s vs %s", p.Ratio, p.Phase, versusText(p))
		if len(rounds) > 1 {
			each := make([]string, len(p.Ratios))
			for i, v := range p.Ratios {
				each[i] = fmt.Sprintf("%.2f", v)
			}
			line += " (rounds " + strings.Join(each, " ") + ")"
		}
		fmt.Fprintln(w, line)
	}
	first = true
	for _, p := range phases {
		self, db, hasDB, ok := cpu(p.Phase, p.Msgs)
		if !ok {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nCPU µs PER MESSAGE (median of rounds; bench process incl. embedded NATS and SQLite; database server processes)")
			first = false
		}
		line := fmt.Sprintf("%-32s %8.1f", p.Phase, self)
		if hasDB {
			line += fmt.Sprintf(" %8.1f", db)
		}
		fmt.Fprintln(w, line)
	}
}

// cpuFunc reports a phase's CPU per message (benchOptions.cpuPerMessage).
type cpuFunc func(phase string, msgs int) (self, db float64, hasDB, ok bool)

// redactURL drops user information from a URL before it is printed.
func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "********" + u[i:]
		}
		return "********" + u[i:]
	}
	return u
}

// nullSink commits everything without writing: the pipeline phase with it
// measures the runner's own overhead.
type nullSink struct{}

func (nullSink) Type() string { return "null" }
func (nullSink) WriteBatch(_ context.Context, b []*sink.Envelope) []sink.Result {
	res := make([]sink.Result, len(b))
	for i := range res {
		res[i] = sink.Ok
	}
	return res
}
func (nullSink) Stop(context.Context) error { return nil }

// pipeline runs one full runner with the given sink over all messages and
// times it until the consumer's ack floor reaches the last message.
func (o *benchOptions) pipeline(ctx context.Context, env *Env, t *benchTarget, sinkType, variant, id string, limit time.Duration) (benchRow, error) {
	consumer := fmt.Sprintf("bench-pipeline-%s-%s", id, sinkType)
	cfg, po, err := o.variantConfig(env, t, sinkType, consumer, variant)
	if err != nil {
		return benchRow{}, err
	}
	p, err := pipeline.Start(ctx, cfg, po)
	if err != nil {
		return benchRow{}, err
	}
	defer p.Close(10 * time.Second)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	mark := markCPU(o.dbProcesses(sinkType))
	start := time.Now()
	go func() { runErr <- p.Run(runCtx) }()
	c, err := t.js.Consumer(ctx, t.stream, consumer)
	if err != nil {
		return benchRow{}, err
	}
	for {
		info, err := c.Info(ctx)
		if err == nil && info.AckFloor.Stream >= uint64(o.messages) && info.NumAckPending == 0 {
			break
		}
		if time.Since(start) > limit {
			return benchRow{}, fmt.Errorf("pipeline (%s): not every message was acknowledged within %v", sinkType, limit)
		}
		select {
		case err := <-runErr:
			return benchRow{}, fmt.Errorf("pipeline (%s) stopped: %v", sinkType, err)
		case <-ctx.Done():
			return benchRow{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	o.noteCPU(phaseName(sinkType, variant), mark)
	stop()
	<-runErr
	return benchRow{phaseName(sinkType, variant), o.messages, elapsed.Seconds()}, nil
}

// phaseName is the table's name of a pipeline phase.
func phaseName(sinkType, variant string) string {
	if variant == "" || variant == "off" {
		return fmt.Sprintf("pipeline (%s)", sinkType)
	}
	return fmt.Sprintf("pipeline (%s, %s)", sinkType, variant)
}

// phaseConfig is the configuration and pipeline options of a phase with
// the given sink on bench's stream, read by consumer.
func (o *benchOptions) phaseConfig(env *Env, t *benchTarget, sinkType, consumer string) (*config.Config, pipeline.Options, error) {
	return o.variantConfig(env, t, sinkType, consumer, "off")
}

// variantConfig is phaseConfig with the integrity variant's
// message_authenticity and custody sections (bench_integrity.go).
func (o *benchOptions) variantConfig(env *Env, t *benchTarget, sinkType, consumer, variant string) (*config.Config, pipeline.Options, error) {
	sinkJSON := `{"type": "file", "directory": "unused"}`
	if o.cfg == nil && sinkType != "null" {
		prefix := sinkType + "-sink-"
		if variant != "off" {
			prefix = sinkType + "-" + variant + "-sink-"
		}
		dir, err := os.MkdirTemp(t.tmp, prefix)
		if err != nil {
			return nil, pipeline.Options{}, err
		}
		switch sinkType {
		case "file":
			sinkJSON = fmt.Sprintf(`{"type": "file", "directory": %q, "fsync": true}`, dir)
		case "sqlite":
			sinkJSON = fmt.Sprintf(`{"type": "sqlite", "path": %q}`, filepath.Join(dir, "bench.db"))
		case "fanout-null-null", "fanout-file-file", "fanout-file-sqlite":
			// Every message to both targets, both required: the gate waits
			// for the slower one.
			target := func(typ, name string) string {
				switch typ {
				case "file":
					return fmt.Sprintf(`{"type": "file", "directory": %q, "fsync": true}`, filepath.Join(dir, name))
				case "sqlite":
					return fmt.Sprintf(`{"type": "sqlite", "path": %q}`, filepath.Join(dir, name+".db"))
				}
				return `{"type": "null"}`
			}
			ts := fanoutTargets(sinkType)
			sinkJSON = fmt.Sprintf(`{"type": "fanout",
  "sinks": {"a": %s, "b": %s},
  "routes": [{"name": "all", "match": {"subject": %q}, "targets": ["a", "b"]}]}`, target(ts[0], "a"), target(ts[len(ts)-1], "b"), t.subject+".>")
		case "segments":
			sinkJSON = fmt.Sprintf(`{"type": "segments", "directory": %q, "fsync": true}`, dir)
		}
	}
	doc := fmt.Sprintf(`{
  "nats": {"url": "nats://127.0.0.1:4222", "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"max_ack_pending": %d},
  "delivery": {"batch_size": %d, "max_in_flight_batches": %d, "batch_timeout_ms": 200},
  "logging": {"level": "ERROR"},
  "encryption": {"enabled": %t, "key_b64_env": "NATS_SINKS_BENCH_KEY_B64"},%s
  "sink": %s}`, t.stream, consumer, t.subject+".>", o.batchSize*(o.inFlight+1), o.batchSize, o.inFlight, o.encrypt, o.integrityJSON(t, variant), sinkJSON)
	// --encrypt: a random key, given to this pipeline only.
	key := make([]byte, 32)
	rand.Read(key)
	getenv := func(name string) (string, bool) {
		if name == "NATS_SINKS_BENCH_KEY_B64" {
			return base64.StdEncoding.EncodeToString(key), true
		}
		if v, ok := o.keys.lookup(name); ok {
			return v, true
		}
		return env.Getenv(name)
	}
	cfg, err := config.Parse([]byte(doc), "bench", benchRegistry(), config.Env(getenv))
	if err != nil {
		return nil, pipeline.Options{}, fmt.Errorf("bench configuration: %w", err)
	}
	if o.cfg != nil {
		// --config: its sink, delivery and encryption, on bench's own
		// stream and consumer.
		own := *o.cfg
		own.NATS.Stream, own.NATS.Consumer, own.NATS.Subject = cfg.NATS.Stream, cfg.NATS.Consumer, cfg.NATS.Subject
		own.NATS.Durable = true
		own.ConsumerManagement = cfg.ConsumerManagement
		own.Delivery.BatchSize, own.Delivery.MaxInFlightBatches = o.batchSize, o.inFlight
		own.DeadLetter.Enabled = false
		own.Metrics.Enabled = false
		if o.encrypt {
			own.Encryption = cfg.Encryption
		}
		if variant != "off" {
			own.MessageAuthenticity, own.Custody = cfg.MessageAuthenticity, cfg.Custody
		}
		cfg = &own
	}
	// A sink that holds messages until their segment commits (Parquet, or
	// any S3 target) needs room for its holds on the consumer: leave
	// max_ack_pending to the pipeline, which sizes it from the sink's own
	// limit (docs/segments.md).
	if heldSegments(cfg.Sink) {
		cfg.ConsumerManagement.MaxAckPending = nil
	}
	po := pipeline.Options{Env: config.Env(getenv), Logger: telemetry.NewLogger(env.Stderr, "text", "ERROR"), Conn: t.nc, Version: Version}
	if sinkType == "null" {
		po.Sink = nullSink{}
	}
	return cfg, po, nil
}

// heldSegments reports whether sc is a segments sink in held mode.
func heldSegments(sc config.SinkConfig) bool {
	var seg *segments.Config
	switch c := sc.Opener.(type) {
	case segments.Config:
		seg = &c
	case *segments.Config:
		seg = c
	default:
		return false
	}
	return seg.Format == "parquet" || seg.Target == "s3"
}
