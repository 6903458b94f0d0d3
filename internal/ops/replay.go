package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsapi"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/runner"
)

// ReplayRequest is what the operator asked `replay` for.
type ReplayRequest struct {
	// FromSeq or FromTime starts the range; exactly one is set.
	FromSeq  uint64
	FromTime time.Time
	// ToSeq or ToTime ends it; neither means the stream's last sequence
	// when the replay starts.
	ToSeq  uint64
	ToTime time.Time
	// Subjects filter the range; empty means the configuration's filters.
	Subjects []string
	// Consumer names a durable replay consumer; "" means an ephemeral one.
	Consumer string
}

// CheckReplay validates req against cfg without any I/O: a range start,
// filters inside the configured ones, a consumer name of its own.
func CheckReplay(cfg *config.Config, req *ReplayRequest) error {
	if req.FromSeq == 0 && req.FromTime.IsZero() {
		return configError("replay: give --from-seq N or --from-time T")
	}
	if req.FromSeq > 0 && !req.FromTime.IsZero() {
		return configError("replay: give --from-seq or --from-time, not both")
	}
	if req.ToSeq > 0 && !req.ToTime.IsZero() {
		return configError("replay: give --to-seq or --to-time, not both")
	}
	if req.ToSeq > 0 && req.FromSeq > 0 && req.ToSeq < req.FromSeq {
		return configError("--to-seq: %d is before --from-seq %d", req.ToSeq, req.FromSeq)
	}
	if !req.ToTime.IsZero() && !req.FromTime.IsZero() && !req.ToTime.After(req.FromTime) {
		return configError("--to-time: must be after --from-time")
	}
	outer := configFilters(cfg)
	for _, s := range req.Subjects {
		if err := subject.Validate(s); err != nil {
			return configError("--subject %q: %v", s, err)
		}
		if !slices.ContainsFunc(outer, func(o string) bool { return subject.Contains(o, s) }) {
			return configError("--subject: %q is not inside the configured filters (%s)", s, strings.Join(outer, ", "))
		}
	}
	if req.Consumer != "" {
		if strings.ContainsAny(req.Consumer, " \t\r\n.*>/\\") {
			return configError("--consumer: %q must not contain whitespace, '.', '*', '>', '/' or '\\'", req.Consumer)
		}
		if req.Consumer == cfg.NATS.Consumer {
			return configError("--consumer: must differ from nats.consumer %q: replay never uses the consumer of run", req.Consumer)
		}
	}
	return nil
}

// configFilters returns the consumer filters of cfg: filter_subjects, else
// nats.subject.
func configFilters(cfg *config.Config) []string {
	if len(cfg.ConsumerManagement.FilterSubjects) > 0 {
		return cfg.ConsumerManagement.FilterSubjects
	}
	return []string{cfg.NATS.Subject}
}

// A Replay is one planned replay: its range, fixed at start, and its own
// consumer on the stream.
type Replay struct {
	Stream string
	// FirstSeq is where the range starts (the first stored sequence at or
	// after the requested start); EndSeq its last sequence.
	FirstSeq, EndSeq uint64
	Filters          []string
	// Name is the consumer's; Named is true for --consumer (kept after the
	// replay unless --delete-consumer).
	Name  string
	Named bool
	// Reused is true when a named consumer existed and is resumed.
	Reused bool
	// Total is the number of messages the range holds for the consumer
	// (progress); -1 when unknown.
	Total    int
	Consumer jetstream.Consumer
}

// PlanReplay resolves the range of req on cfg's stream and creates (or, for
// a named consumer with the same start and filters, binds) the replay
// consumer. It never touches nats.consumer. Problems with the request —
// a range outside the stream, a named consumer that differs — are
// *ConfigError. log receives a warning when the progress total cannot be
// counted.
func PlanReplay(ctx context.Context, cfg *config.Config, api *jsapi.Client, js jetstream.JetStream, req *ReplayRequest, log *slog.Logger) (*Replay, error) {
	stream := cfg.NATS.Stream
	info, err := api.StreamInfo(ctx, stream, "")
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, configError("nats.stream: stream %q not found", stream)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	st := info.State
	if st.Msgs == 0 || st.LastSeq == 0 {
		return nil, configError("stream %s is empty: nothing to replay", stream)
	}
	rp := &Replay{Stream: stream, Filters: req.Subjects, Name: req.Consumer, Named: req.Consumer != "", Total: -1}
	if len(rp.Filters) == 0 {
		rp.Filters = configFilters(cfg)
	}

	// Start.
	switch {
	case req.FromSeq > 0:
		if req.FromSeq > st.LastSeq {
			return nil, configError("--from-seq: %d is after the last sequence of stream %s (%d)", req.FromSeq, stream, st.LastSeq)
		}
		rp.FirstSeq = max(req.FromSeq, st.FirstSeq)
	default:
		seq, ok, err := firstAtOrAfter(ctx, api, stream, req.FromTime, st.FirstSeq, st.LastSeq)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, configError("--from-time: stream %s holds no message stored at or after %s (last at %s)",
				stream, req.FromTime.UTC().Format(time.RFC3339Nano), st.LastTime.UTC().Format(time.RFC3339Nano))
		}
		rp.FirstSeq = seq
	}
	// End.
	switch {
	case req.ToSeq > 0:
		if req.ToSeq > st.LastSeq {
			return nil, configError("--to-seq: %d is after the last sequence of stream %s (%d)", req.ToSeq, stream, st.LastSeq)
		}
		if req.ToSeq < st.FirstSeq {
			return nil, configError("--to-seq: %d is before the first sequence of stream %s (%d)", req.ToSeq, stream, st.FirstSeq)
		}
		rp.EndSeq = req.ToSeq
	case !req.ToTime.IsZero():
		seq, ok, err := firstAtOrAfter(ctx, api, stream, req.ToTime, st.FirstSeq, st.LastSeq)
		if err != nil {
			return nil, err
		}
		rp.EndSeq = st.LastSeq
		if ok {
			rp.EndSeq = seq - 1
		}
	default:
		rp.EndSeq = st.LastSeq
	}
	if rp.EndSeq < rp.FirstSeq {
		return nil, configError("replay: the range is empty (first sequence %d, end sequence %d)", rp.FirstSeq, rp.EndSeq)
	}

	// The consumer. The messages after the range are counted first, so
	// that a message published meanwhile can only make the total too
	// large, never too small (the tracker's fetch sizes rely on that).
	desired := replayConsumer(cfg, req, rp)
	if !rp.Named {
		rp.Name = "nats-sink-replay-" + randomHex()
		desired.Name = rp.Name
	}
	after, perr := probe(ctx, api, js, stream, rp.Name+"-probe", rp.EndSeq+1, rp.Filters)
	if rp.Named {
		wctx, stop := api.Watch(ctx, api.Subject("CONSUMER", "INFO", stream, rp.Name))
		c, err := js.Consumer(wctx, stream, rp.Name)
		err = jsapi.Explain(wctx, err)
		stop()
		switch {
		case err == nil:
			if err := sameStart(c.CachedInfo(), desired); err != nil {
				return nil, err
			}
			rp.Consumer, rp.Reused = c, true
		case errors.Is(err, jetstream.ErrConsumerNotFound):
		default:
			return nil, fmt.Errorf("look up replay consumer %q on stream %q: %w", rp.Name, stream, err)
		}
	}
	if rp.Consumer == nil {
		wctx, stop := api.Watch(ctx, api.Subject("CONSUMER", "CREATE", stream, rp.Name))
		rp.Consumer, err = js.CreateConsumer(wctx, stream, desired)
		err = jsapi.Explain(wctx, err)
		stop()
		if err != nil {
			return nil, fmt.Errorf("create replay consumer %q on stream %q: %w", rp.Name, stream, err)
		}
	}
	ci := rp.Consumer.CachedInfo()
	total := ci.NumPending + uint64(ci.NumAckPending)
	if perr != nil {
		log.Warn("replay: cannot count the messages after the range; the progress total includes them", "error", perr.Error())
		rp.Total = int(total)
	} else {
		rp.Total = int(total - min(after, total))
	}
	return rp, nil
}

// replayConsumer is the replay consumer's configuration: explicit ACKs,
// the range's start and filters, ack_wait, max_ack_pending and
// headers_only from consumer_management, and a max_deliver that lets every
// message end (written, dead-lettered on its last delivery, or counted
// failed).
func replayConsumer(cfg *config.Config, req *ReplayRequest, rp *Replay) jetstream.ConsumerConfig {
	cm := &cfg.ConsumerManagement
	c := jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: cfg.Delivery.MaxRetries + 1}
	if req.FromSeq > 0 {
		c.DeliverPolicy, c.OptStartSeq = jetstream.DeliverByStartSequencePolicy, req.FromSeq
	} else {
		t := req.FromTime.UTC()
		c.DeliverPolicy, c.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	if len(rp.Filters) == 1 {
		c.FilterSubject = rp.Filters[0]
	} else {
		c.FilterSubjects = slices.Clone(rp.Filters)
	}
	if cm.MaxDeliver != nil && *cm.MaxDeliver > 0 {
		c.MaxDeliver = *cm.MaxDeliver
	}
	if cm.AckWaitSeconds != nil {
		c.AckWait = time.Duration(*cm.AckWaitSeconds * float64(time.Second))
	}
	if cm.MaxAckPending != nil {
		c.MaxAckPending = *cm.MaxAckPending
	}
	if cm.HeadersOnly != nil {
		c.HeadersOnly = *cm.HeadersOnly
	}
	if rp.Named {
		c.Name, c.Durable = rp.Name, rp.Name
	} else {
		c.InactiveThreshold = 5 * time.Minute
	}
	return c
}

// sameStart checks that an existing named consumer replays the same range
// start with the same filters: only then does it resume this replay.
func sameStart(info *jetstream.ConsumerInfo, want jetstream.ConsumerConfig) error {
	if info == nil {
		return errors.New("replay consumer: no consumer info")
	}
	have := info.Config
	differs := func(field, got, wanted string) error {
		return configError("--consumer: consumer %q exists with %s %s, this replay needs %s; use another name or delete it",
			info.Name, field, got, wanted)
	}
	if have.DeliverPolicy != want.DeliverPolicy {
		return differs("deliver_policy", have.DeliverPolicy.String(), want.DeliverPolicy.String())
	}
	if have.OptStartSeq != want.OptStartSeq {
		return differs("opt_start_seq", fmt.Sprint(have.OptStartSeq), fmt.Sprint(want.OptStartSeq))
	}
	if (have.OptStartTime == nil) != (want.OptStartTime == nil) || have.OptStartTime != nil && !have.OptStartTime.Equal(*want.OptStartTime) {
		return differs("opt_start_time", timeText(have.OptStartTime), timeText(want.OptStartTime))
	}
	hf, wf := filtersOf(have), filtersOf(want)
	if !slices.Equal(hf, wf) {
		return differs("filter_subjects", "["+strings.Join(hf, ", ")+"]", "["+strings.Join(wf, ", ")+"]")
	}
	return nil
}

func filtersOf(c jetstream.ConsumerConfig) []string {
	f := slices.Clone(c.FilterSubjects)
	if c.FilterSubject != "" {
		f = append(f, c.FilterSubject)
	}
	slices.Sort(f)
	return f
}

func timeText(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// probe counts the messages at or after seq on filters with a short-lived
// consumer, deleted again at once.
func probe(ctx context.Context, api *jsapi.Client, js jetstream.JetStream, stream, name string, seq uint64, filters []string) (uint64, error) {
	c := jetstream.ConsumerConfig{Name: name, AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq, InactiveThreshold: time.Minute}
	if len(filters) == 1 {
		c.FilterSubject = filters[0]
	} else {
		c.FilterSubjects = filters
	}
	ctx, cancel := context.WithTimeout(ctx, jsapi.DefaultTimeout)
	defer cancel()
	wctx, stop := api.Watch(ctx, api.Subject("CONSUMER", "CREATE", stream, name))
	pc, err := js.CreateConsumer(wctx, stream, c)
	err = jsapi.Explain(wctx, err)
	stop()
	if err != nil {
		return 0, err
	}
	n := pc.CachedInfo().NumPending
	if err := DeleteConsumer(ctx, api, js, stream, name); err != nil {
		return 0, err
	}
	return n, nil
}

// firstAtOrAfter returns the sequence of the first message stored at or
// after t. Servers without start_time in STREAM.MSG.GET are searched by
// sequence (stored times grow with the sequence).
func firstAtOrAfter(ctx context.Context, api *jsapi.Client, stream string, t time.Time, first, last uint64) (uint64, bool, error) {
	ut := t.UTC()
	m, err := api.GetMsg(ctx, stream, jsapi.GetMsgRequest{StartTime: &ut, NextBySubject: ">"})
	switch {
	case err == nil && !m.Time.Before(t):
		return m.Seq, true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, false, nil
	case err != nil && !isAPIError(err):
		return 0, false, fmt.Errorf("find the first message of stream %s at or after %s: %w", stream, ut.Format(time.RFC3339Nano), err)
	}
	// Binary search over [first, last+1): the first sequence whose next
	// stored message is at or after t.
	at := func(seq uint64) (*jsapi.Msg, error) {
		m, err := api.GetMsg(ctx, stream, jsapi.GetMsgRequest{Seq: seq, NextBySubject: ">"})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		return m, err
	}
	lo, hi := first, last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := at(mid)
		if err != nil {
			return 0, false, err
		}
		if m == nil || !m.Time.Before(t) {
			hi = mid
		} else {
			lo = m.Seq + 1
		}
	}
	m, err = at(lo)
	if err != nil || m == nil {
		return 0, false, err
	}
	return m.Seq, true, nil
}

// DeleteConsumer deletes consumer name of stream; a refusal fails at once.
func DeleteConsumer(ctx context.Context, api *jsapi.Client, js jetstream.JetStream, stream, name string) error {
	ctx, cancel := context.WithTimeout(ctx, jsapi.DefaultTimeout)
	defer cancel()
	wctx, stop := api.Watch(ctx, api.Subject("CONSUMER", "DELETE", stream, name))
	defer stop()
	err := js.DeleteConsumer(wctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	return jsapi.Explain(wctx, err)
}

func randomHex() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ReplayCounts are the outcomes of a replay so far.
type ReplayCounts struct {
	Written, Duplicates, DeadLettered, Failed int
}

// Messages is the number of settled deliveries: a message whose ACK was
// lost is redelivered and counted again (as a duplicate).
func (c ReplayCounts) Messages() int { return c.Written + c.Duplicates + c.DeadLettered + c.Failed }

// A Tracker follows a replay's messages between the consumer and the
// runner: it hides deliveries above the range end from the runner (never
// written, never ACKed), keeps fetches no larger than the range still
// needs, and learns from the runner's Settled hook how each message ended.
// The replay is done when no delivered message of the range is unsettled
// and either a delivery above the end was seen or the consumer has nothing
// pending.
type Tracker struct {
	end   uint64
	total int // -1 unknown

	mu          sync.Mutex
	outstanding map[uint64]struct{}  // delivered ≤ end, not settled
	firsts      int                  // first deliveries ≤ end
	above       bool                 // a delivery above end was seen
	fetching    map[uint64]time.Time // fetches in progress, by id: their start
	nextFetch   uint64
	counts      ReplayCounts
	idle        chan struct{} // gets a value when the last outstanding message settles
}

// NewTracker returns a tracker for a range ending at end holding total
// messages (-1 when unknown).
func NewTracker(end uint64, total int) *Tracker {
	return &Tracker{end: end, total: total, outstanding: map[uint64]struct{}{}, fetching: map[uint64]time.Time{},
		idle: make(chan struct{}, 1)}
}

// Settled is the runner's Settled hook.
func (t *Tracker) Settled(msg jetstream.Msg, s runner.Settlement) {
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.outstanding, md.Sequence.Stream)
	switch s {
	case runner.SettledWritten:
		t.counts.Written++
	case runner.SettledDuplicate:
		t.counts.Duplicates++
	case runner.SettledDeadLettered:
		t.counts.DeadLettered++
	case runner.SettledGivenUp:
		t.counts.Failed++
	}
	if len(t.outstanding) == 0 {
		// Only now can the replay be done; waking the caller on every
		// settlement would cost more than the settlement.
		select {
		case t.idle <- struct{}{}:
		default:
		}
	}
}

// Counts returns the outcomes so far.
func (t *Tracker) Counts() ReplayCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

// Idle returns a channel that receives when the last outstanding message
// of the range settled: the moment to check Done.
func (t *Tracker) Idle() <-chan struct{} { return t.idle }

// Done reports whether the replay is complete: no delivered message of the
// range is unsettled, and every message of the range was delivered: as
// many first deliveries as the range's total were seen, or a delivery
// above the end, or — when emptyAt is set — consumer info read at emptyAt
// showed nothing pending and nothing unacknowledged.
// In the second case every fetch that began before emptyAt must have
// returned, so that what it delivered is known.
func (t *Tracker) Done(emptyAt time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.outstanding) > 0 {
		return false
	}
	// Every message has exactly one first delivery, and the total is
	// never below the number of messages the range holds (PlanReplay
	// counts the messages after it first).
	if t.above || t.total >= 0 && t.firsts >= t.total {
		return true
	}
	if emptyAt.IsZero() {
		return false
	}
	for _, started := range t.fetching {
		if !started.After(emptyAt) {
			return false
		}
	}
	return true
}

// Wrap returns c with the tracker between it and the runner.
func (t *Tracker) Wrap(c jetstream.Consumer) jetstream.Consumer {
	return &trackedConsumer{Consumer: c, t: t}
}

// trackedConsumer is the consumer the runner sees during a replay.
type trackedConsumer struct {
	jetstream.Consumer
	t *Tracker
}

func (c *trackedConsumer) FetchNoWait(n int) (jetstream.MessageBatch, error) {
	return c.fetch(n, func(n int) (jetstream.MessageBatch, error) { return c.Consumer.FetchNoWait(n) })
}

func (c *trackedConsumer) Fetch(n int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return c.fetch(n, func(n int) (jetstream.MessageBatch, error) { return c.Consumer.Fetch(n, opts...) })
}

// fetch asks for at most what the range still needs (the messages not yet
// delivered plus those awaiting redelivery, at least one so that an
// undercounted range still ends), waits for the whole batch, and returns
// the deliveries within the range. The runner drains every batch before
// it processes it, so waiting here changes nothing for it.
func (c *trackedConsumer) fetch(n int, do func(int) (jetstream.MessageBatch, error)) (jetstream.MessageBatch, error) {
	t := c.t
	t.mu.Lock()
	if t.total >= 0 {
		n = min(n, max(1, t.total-t.firsts+len(t.outstanding)))
	}
	t.nextFetch++
	id := t.nextFetch
	t.fetching[id] = time.Now()
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.fetching, id)
		t.mu.Unlock()
	}()
	b, err := do(n)
	if err != nil {
		return nil, err
	}
	var keep []jetstream.Msg
	for msg := range b.Messages() {
		md, err := msg.Metadata()
		if err != nil {
			keep = append(keep, msg) // the runner decides; it cannot be placed
			continue
		}
		seq := md.Sequence.Stream
		t.mu.Lock()
		if seq > t.end {
			t.above = true
			t.mu.Unlock()
			continue // never written, never ACKed
		}
		t.outstanding[seq] = struct{}{}
		if md.NumDelivered == 1 {
			t.firsts++
		}
		t.mu.Unlock()
		keep = append(keep, msg)
	}
	ch := make(chan jetstream.Msg, len(keep))
	for _, m := range keep {
		ch <- m
	}
	close(ch)
	return &batch{msgs: ch, err: b.Error()}, nil
}

type batch struct {
	msgs chan jetstream.Msg
	err  error
}

func (b *batch) Messages() <-chan jetstream.Msg { return b.msgs }
func (b *batch) Error() error                   { return b.err }
