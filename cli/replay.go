package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/ops"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	"github.com/nats-sinks/nats-sink/sinks/mysql"
	"github.com/nats-sinks/nats-sink/sinks/oracle"
	"github.com/nats-sinks/nats-sink/sinks/postgres"
	"github.com/nats-sinks/nats-sink/sinks/s3"
	"github.com/nats-sinks/nats-sink/sinks/spool"
	"github.com/nats-sinks/nats-sink/sinks/sqlite"
	"github.com/nats-sinks/nats-sink/telemetry"
)

const replayUsage = "CONFIG (--from-seq N | --from-time T) [--to-seq M | --to-time T2] [--subject FILTER]... [--consumer NAME] [--delete-consumer] [--allow-duplicates] [--no-progress]"

// runReplay is `nats-sink replay` (docs/operations.md): backfill the
// configured sink from a range of nats.stream through the normal runner on
// a consumer of its own.
func runReplay(env *Env, args []string) int {
	// As for run: a signal while starting up must mean a graceful stop.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	fs := newFlags(env, "replay", replayUsage)
	fromSeq := fs.Uint64("from-seq", 0, "first stream sequence of the range (at least 1)")
	fromTime := fs.String("from-time", "", "start at the first message stored at or after T (RFC 3339 or an age like 2h)")
	toSeq := fs.Uint64("to-seq", 0, "last stream sequence of the range")
	toTime := fs.String("to-time", "", "end before the first message stored at or after T2")
	var subjects stringList
	fs.Var(&subjects, "subject", "replay only this filter, inside the configured ones (repeatable)")
	consumerName := fs.String("consumer", "", "use a durable replay consumer NAME, kept afterwards so a rerun resumes")
	deleteConsumer := fs.Bool("delete-consumer", false, "delete the --consumer consumer when the replay ends")
	allowDuplicates := fs.Bool("allow-duplicates", false, "replay into a sink whose duplicate model does not absorb repeated messages")
	noProgress := fs.Bool("no-progress", false, "no progress bar on a terminal")
	pos, code := parseFlags(env, fs, args)
	if code >= 0 {
		return code
	}
	path, ok := oneConfigArg(env, fs, pos)
	if !ok {
		return exitConfig
	}
	cfg, code := loadConfig(env, path)
	if cfg == nil {
		return code
	}
	configErr := func(err error) int {
		fmt.Fprintf(env.Stderr, "Configuration error: %v\n", err)
		return exitConfig
	}
	fromSeqGiven := false
	fs.Visit(func(f *flag.Flag) { fromSeqGiven = fromSeqGiven || f.Name == "from-seq" })
	if fromSeqGiven && *fromSeq == 0 {
		return configErr(errors.New("--from-seq: must be at least 1 (got 0)"))
	}
	req := &ops.ReplayRequest{FromSeq: *fromSeq, ToSeq: *toSeq, Subjects: subjects, Consumer: *consumerName}
	now := time.Now()
	var err error
	if *fromTime != "" {
		if req.FromTime, err = ops.ParseTime("--from-time", *fromTime, now); err != nil {
			return configErr(err)
		}
	}
	if *toTime != "" {
		if req.ToTime, err = ops.ParseTime("--to-time", *toTime, now); err != nil {
			return configErr(err)
		}
	}
	if err := ops.CheckReplay(cfg, req); err != nil {
		return configErr(err)
	}
	if model, absorbs := duplicateModel(cfg); !absorbs && !*allowDuplicates {
		return configErr(fmt.Errorf("replay: sink duplicate model %q does not absorb repeated messages (use --allow-duplicates)", model))
	}

	failed := func(err error) int {
		if errors.Is(err, sink.ErrConfig) {
			return configErr(err)
		}
		fmt.Fprintf(env.Stderr, "Stream replay failed: %v\n", err)
		return exitRuntime
	}
	conn, err := connectOps(env, cfg)
	if err != nil {
		return failed(err)
	}
	defer conn.Close()
	log := telemetry.NewLogger(env.Stderr, cfg.Logging.Format, cfg.Logging.Level)
	startCtx, cancelStart := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelStart()
	plan, err := ops.PlanReplay(startCtx, cfg, conn.api, conn.js, req, log)
	if err != nil {
		return failed(err)
	}
	// From here on the consumer is ours: it is deleted at the end (an
	// ephemeral one always, a named one with --delete-consumer), whatever
	// the outcome.
	defer func() {
		if plan.Named && !*deleteConsumer {
			return
		}
		if err := ops.DeleteConsumer(context.Background(), conn.api, conn.js, plan.Stream, plan.Name); err != nil {
			fmt.Fprintf(env.Stderr, "Warning: replay consumer %q on stream %q was not deleted: %v\n", plan.Name, plan.Stream, err)
		}
	}()

	var prog *progress
	if !*noProgress && isTerminal(env.Stderr) {
		prog = &progress{w: env.Stderr, stream: plan.Stream, total: plan.Total}
	}
	po := pipeline.Options{Env: config.Env(env.Getenv), Logger: log, Version: Version}
	res, err := runReplayPlan(startCtx, cfg, conn, plan, po, prog, sigs)
	if err != nil {
		return failed(err)
	}
	if res.forced {
		fmt.Fprintln(env.Stderr, "Stream replay failed: forced shutdown")
		return exitRuntime
	}
	done, counts, elapsed, runFailure := res.done, res.counts, res.elapsed, res.failure
	if runFailure != nil {
		fmt.Fprintf(env.Stderr, "Stream replay failed: %v\n", runFailure)
	}
	word := "complete"
	if !done {
		word = "incomplete"
	}
	fmt.Fprintf(env.Stdout, "Stream replay %s: stream=%s first_seq=%d end_seq=%d messages=%d written=%d duplicates=%d dead_lettered=%d failed=%d elapsed=%.1fs\n",
		word, plan.Stream, plan.FirstSeq, plan.EndSeq, counts.Messages(), counts.Written, counts.Duplicates,
		counts.DeadLettered, counts.Failed, elapsed.Seconds())
	if done && counts.Failed == 0 {
		return exitOK
	}
	return exitRuntime
}

// replayResult is how a replay ended.
type replayResult struct {
	done    bool // every message of the range settled
	forced  bool // a second signal cut the drain short
	counts  ops.ReplayCounts
	elapsed time.Duration // from the runner's start until done or stopped
	failure error         // why the replay stopped early, if it did
}

// runReplayPlan runs plan through the pipeline, configured by cfg and po
// (Conn, Consumer and Settled are set here), until the range is done, a
// signal arrives on sigs (nil: never) or the replay fails; it drains as run
// does. The error is a start-up failure.
func runReplayPlan(startCtx context.Context, cfg *config.Config, conn *opsConn, plan *ops.Replay, po pipeline.Options,
	prog *progress, sigs <-chan os.Signal) (replayResult, error) {
	tracker := ops.NewTracker(plan.EndSeq, plan.Total)
	po.Conn, po.Consumer, po.Settled = conn.nc, tracker.Wrap(plan.Consumer), tracker.Settled
	sctx, cancel := context.WithCancel(startCtx) // as for run: start-up only
	p, err := pipeline.Start(sctx, cfg, po)
	cancel()
	if err != nil {
		return replayResult{}, err
	}
	// Refusals of optional start-up reads (the progress probe, the DLQ
	// duplicate-window check) were warned about or skipped; from here on
	// every refusal stops the replay.
	for drained := false; !drained; {
		select {
		case <-conn.api.Violations():
		default:
			drained = true
		}
	}
	started := time.Now()
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(runCtx) }()

	interrupted, done := false, false
	var runFailure error
	tick := time.NewTicker(200 * time.Millisecond) // progress: at most 5 updates per second
	defer tick.Stop()
	var lastInfo, emptyAt time.Time
	for !done && !interrupted && runFailure == nil {
		select {
		case <-sigs:
			interrupted = true
		case v := <-conn.api.Violations():
			// A refused pull request looks like an empty fetch and a
			// refused ACK like a sent one: without the permission the
			// replay would wait forever.
			runFailure = v
		case err := <-runErr:
			runErr <- err
			if err == nil {
				err = errors.New("the runner stopped")
			}
			runFailure = err
		case <-tracker.Idle():
			done = tracker.Done(emptyAt)
		case <-tick.C:
			// Once the consumer had nothing left to deliver and nothing
			// unacknowledged, every message of the range was delivered and
			// settled by then: that stays true. (Nothing pending alone is
			// not enough: a message the server delivered into a pull
			// request the client had already given up is unacknowledged
			// and comes back after AckWait, unseen by the tracker.)
			if emptyAt.IsZero() && time.Since(lastInfo) >= time.Second {
				lastInfo = time.Now()
				ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				info, err := plan.Consumer.Info(ictx)
				cancel()
				if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
					emptyAt = lastInfo
				}
			}
			done = tracker.Done(emptyAt)
			if prog != nil {
				prog.update(tracker.Counts().Messages(), p.Ready().Sink != telemetry.CheckOK)
			}
		}
	}
	elapsed := time.Since(started)
	// Drain as run does: in-flight batches finish, nothing unfinished is
	// ACKed. A second signal stops at once.
	stop()
	select {
	case err := <-runErr:
		if err != nil && runFailure == nil && !interrupted {
			runFailure = err
		}
	case <-sigs:
		return replayResult{forced: true}, nil
	}
	p.Close(5 * time.Second)
	counts := tracker.Counts()
	if prog != nil {
		prog.update(counts.Messages(), false)
		prog.finish()
	}
	return replayResult{done: done, counts: counts, elapsed: elapsed, failure: runFailure}, nil
}

// duplicateModel returns the sink's duplicate model and whether it absorbs
// a message written again: replaying a range that is already stored must
// not dead-letter or duplicate it.
func duplicateModel(cfg *config.Config) (string, bool) {
	switch c := cfg.Sink.Opener.(type) {
	case file.Config:
		return c.DuplicatePolicy, c.DuplicatePolicy != "fail"
	case s3sink.Config:
		return c.DuplicatePolicy, c.DuplicatePolicy != "fail_existing"
	case spool.Config:
		return c.DuplicatePolicy, c.DuplicatePolicy != "fail"
	case postgres.Config:
		return c.Mode, sqlAbsorbs(c.Mode)
	case sqlite.Config:
		return c.Mode, sqlAbsorbs(c.Mode)
	case mysql.Config:
		return c.Mode, sqlAbsorbs(c.Mode)
	case oracle.Config:
		return c.Mode, sqlAbsorbs(c.Mode)
	}
	return "", true
}

func sqlAbsorbs(mode string) bool { return mode != "insert" && mode != "append" }

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws the replay's progress line on a terminal, in place.
type progress struct {
	w       io.Writer
	stream  string
	total   int
	samples []sample // the last 10 s, for the rate
	drawn   bool
}

type sample struct {
	at   time.Time
	done int
}

func (p *progress) update(done int, paused bool) {
	now := time.Now()
	p.samples = append(p.samples, sample{now, done})
	for len(p.samples) > 1 && now.Sub(p.samples[0].at) > 10*time.Second {
		p.samples = p.samples[1:]
	}
	rate := 0.0
	if first := p.samples[0]; now.Sub(first.at) > 0 {
		rate = float64(done-first.done) / now.Sub(first.at).Seconds()
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(p.stream, done, p.total, rate, paused))
	p.drawn = true
}

func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// progressLine is one progress update:
// ORDERS [##########----------]  50.2%  50,210/100,000  4,120 msg/s  ETA 0:00:12
func progressLine(stream string, done, total int, rate float64, paused bool) string {
	const width = 20
	frac := 0.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	filled := int(frac * width)
	bar := strings.Repeat("#", filled) + strings.Repeat("-", width-filled)
	tail := "ETA -:--:--"
	switch {
	case paused:
		tail = "paused: sink unhealthy"
	case done >= total && total >= 0:
		tail = "ETA 0:00:00"
	case rate > 0 && total > 0:
		eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		tail = fmt.Sprintf("ETA %d:%02d:%02d", int(eta.Hours()), int(eta.Minutes())%60, int(eta.Seconds())%60)
	}
	totalText := "?"
	if total >= 0 {
		totalText = thousands(total)
	}
	return fmt.Sprintf("%s [%s] %5.1f%%  %s/%s  %s msg/s  %s", stream, bar, frac*100, thousands(done), totalText,
		thousands(int(rate+0.5)), tail)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
