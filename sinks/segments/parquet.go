package segments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"golang.org/x/sys/unix"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Held mode (format parquet): a message written into an open segment is
// reported Held, and its hold settles when the segment is committed — footer
// written, file fsynced, renamed to its final name, directory fsynced — or
// when that failed. Until then the runner keeps the message unacknowledged,
// so a crash before the commit loses nothing: start-up recovery deletes the
// .parquet.open file and the messages are redelivered.

var _ sink.Holder = (*Sink)(nil)

// ParquetSchema is the value of the nats_sinks.schema key-value metadata.
const ParquetSchema = "nats_sinks.segment.parquet.v1"

// row is one Parquet record: the fixed columns in their documented order.
// Timestamps are epoch nanoseconds of microsecond-precision times.
type row struct {
	StreamName     string   `parquet:"stream_name"`
	Subject        string   `parquet:"subject"`
	StreamSequence int64    `parquet:"stream_sequence"`
	MessageID      *string  `parquet:"message_id,optional"`
	Priority       *string  `parquet:"priority,optional"`
	Classification *string  `parquet:"classification,optional"`
	IdempotencyKey string   `parquet:"idempotency_key"`
	Labels         []string `parquet:"labels,list"`
	CreatedAt      *int64   `parquet:"created_at,optional,timestamp(nanosecond:utc)"`
	PublishedAt    *int64   `parquet:"published_at,optional,timestamp(nanosecond:utc)"`
	ReceivedAt     int64    `parquet:"received_at,timestamp(nanosecond:utc)"`
	StoredAt       int64    `parquet:"stored_at,timestamp(nanosecond:utc)"`
	PayloadFormat  string   `parquet:"payload_format"`
	Payload        string   `parquet:"payload"`
	HeadersJSON    string   `parquet:"headers_json"`
	MetadataJSON   *string  `parquet:"metadata_json,optional"`
}

// size is a rough count of the row's bytes before compression, used to
// roll at max_bytes before the append that would pass it.
func (r *row) size() int64 {
	n := len(r.StreamName) + len(r.Subject) + len(r.IdempotencyKey) + len(r.Payload) + len(r.HeadersJSON) + 64
	if r.MetadataJSON != nil {
		n += len(*r.MetadataJSON)
	}
	for _, l := range r.Labels {
		n += len(l)
	}
	return int64(n)
}

// hold is the pending commit of one segment.
type hold struct {
	done    chan struct{}
	outcome sink.Outcome
	err     error
}

var _ sink.Hold = (*hold)(nil)

func newHold() *hold { return &hold{done: make(chan struct{})} }

func (h *hold) Done() <-chan struct{} { return h.done }
func (h *hold) Outcome() sink.Outcome { return h.outcome }
func (h *hold) Err() error            { return h.err }

func (h *hold) settle(o sink.Outcome, err error) {
	h.outcome, h.err = o, err
	close(h.done)
}

// heldKey identifies a held message, so that its redelivery joins the hold
// instead of being written again.
type heldKey struct {
	stream string
	seq    uint64
}

// heldState is the sink's held-mode bookkeeping, guarded by mu.
type heldState struct {
	mu       sync.Mutex
	n        int // messages held in open or committing segments
	by       map[heldKey]*hold
	released chan struct{} // closed and replaced whenever holds settle
}

// fdWriter writes sequentially at the end of the segment file. Not an
// os.File: the segment owns the descriptor and closes it once.
type fdWriter struct {
	fd  int
	off int64
}

func (w *fdWriter) Write(b []byte) (int, error) {
	if err := pwriteAll(w.fd, b, w.off); err != nil {
		return 0, err
	}
	w.off += int64(len(b))
	return len(b), nil
}

// createdBy sets the footer's created_by to "nats-sink version <v>".
type createdBy string

func (c createdBy) ConfigureWriter(cfg *parquet.WriterConfig) { cfg.CreatedBy = string(c) }

func productVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.1.0-dev"
}

// parquetCodec returns the page codec of the configured compression.
func parquetCodec(c *Config) compress.Codec {
	switch c.compression() {
	case "snappy":
		return &snappy.Codec{}
	case "gzip":
		return &gzip.Codec{Level: c.level()}
	case "none":
		return &uncompressed.Codec{}
	}
	return &zstd.Codec{Level: kzstd.EncoderLevelFromZstd(c.level())}
}

// initHeld prepares a new held-mode segment: its hold and, for Parquet,
// its writer.
func (s *Sink) initHeld(seg *segment) {
	seg.hold = newHold()
	if s.cfg.Format == "parquet" {
		s.initParquet(seg)
	}
}

// initParquet starts the Parquet writer of a new held-mode segment.
func (s *Sink) initParquet(seg *segment) {
	seg.out = &fdWriter{fd: seg.fd}
	opts := []parquet.WriterOption{
		parquet.Compression(s.codec),
		parquet.MaxRowsPerRowGroup(int64(s.cfg.rowGroupRecords())),
		createdBy("nats-sink version " + productVersion()),
	}
	if s.ms != nil {
		seg.mw = parquet.NewWriter(seg.out, append(opts, s.ms.schema)...)
		seg.pw = seg.mw
		return
	}
	seg.gw = parquet.NewGenericWriter[row](seg.out, opts...)
	seg.pw = seg.gw
}

// pqWriter is what a segment needs of its Parquet writer.
type pqWriter interface {
	Flush() error
	Close() error
	SetKeyValueMetadata(key, value string)
	Size() int64
}

// MaxHeld returns max_held_messages in held mode (format parquet, target
// s3), else 0.
func (s *Sink) MaxHeld() int { return s.cfg.maxHeld() }

// hitem is one message's row on its way into a segment.
type hitem struct {
	i    int
	row  row    // parquet
	vals []any  // parquet: mapped column values
	line []byte // jsonl
	key  heldKey
}

// writeHeld is WriteBatch in held mode.
func (s *Sink) writeHeld(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	storedAt := s.now()
	type hgroup struct {
		dir   string
		items []hitem
	}
	var groups []*hgroup
	index := map[string]*hgroup{}
	n := 0
	for i, e := range batch {
		var (
			r    row
			vals []any
			line []byte
			dir  string
			err  error
		)
		if s.cfg.Format == "parquet" {
			if dir, err = s.locate(e); err == nil {
				r, err = s.buildRow(e, storedAt)
			}
			if err == nil && s.ms != nil {
				vals, err = s.ms.values(e, record.PayloadMode(s.cfg.PayloadMode))
			}
		} else {
			var it item
			it, dir, err = s.build(e, storedAt)
			line = it.line
		}
		if err != nil {
			results[i] = sink.Failed(err)
			continue
		}
		key := heldKey{e.Stream, e.StreamSequence}
		s.hs.mu.Lock()
		h := s.hs.by[key]
		s.hs.mu.Unlock()
		if h != nil {
			// A redelivery of a message this process holds: it joins the
			// hold, and both deliveries are acknowledged on commit.
			results[i] = sink.Result{Outcome: sink.Held, Hold: h}
			continue
		}
		g := index[dir]
		if g == nil {
			g = &hgroup{dir: dir}
			index[dir] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, hitem{i: i, row: r, vals: vals, line: line, key: key})
		n++
	}
	if n == 0 {
		return results
	}
	if err := s.reserve(ctx, n); err != nil {
		for _, g := range groups {
			for _, it := range g.items {
				results[it.i] = sink.Failed(fmt.Errorf("segments sink (stream seq %d): waiting for held messages to commit: %w", it.key.seq, err))
			}
		}
		return results
	}
	appended := 0
	for gi, g := range groups {
		k, err := s.appendHeld(g.dir, g.items, results)
		appended += k
		if err != nil {
			for _, g := range groups[gi+1:] {
				for _, it := range g.items {
					results[it.i] = sink.Result{Outcome: sink.NotAttempted}
				}
			}
			break
		}
	}
	if appended < n {
		s.release(n-appended, nil)
	}
	return results
}

// reserve waits until n more messages fit under max_held_messages, closing
// (and so committing) open segments oldest first while they do not.
func (s *Sink) reserve(ctx context.Context, n int) error {
	limit := s.cfg.maxHeld()
	for {
		s.hs.mu.Lock()
		if s.hs.n+n <= limit || s.hs.n == 0 {
			s.hs.n += n
			s.hs.mu.Unlock()
			return nil
		}
		ch := s.hs.released
		s.hs.mu.Unlock()
		if seg := s.oldestOpen(); seg != nil {
			s.finish(seg, "held_limit")
			continue
		}
		// Held messages are in segments another goroutine is appending to
		// or committing: wait for a settlement, and look again shortly.
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// release returns n reservations, and forgets the keys of a settled hold.
func (s *Sink) release(n int, keys []heldKey) {
	s.hs.mu.Lock()
	s.hs.n -= n
	for _, k := range keys {
		delete(s.hs.by, k)
	}
	close(s.hs.released)
	s.hs.released = make(chan struct{})
	s.hs.mu.Unlock()
}

// oldestOpen returns the non-empty open segment with the oldest first
// append, or nil.
func (s *Sink) oldestOpen() *segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest *segment
	for _, seg := range s.open {
		if seg.records > 0 && (oldest == nil || seg.firstAt.Before(oldest.firstAt)) {
			oldest = seg
		}
	}
	return oldest
}

// appendHeld writes items into the open segments of dir, splitting at
// max_records and rolling at max_bytes. It returns how many were appended;
// on failure the rest get the failure's class and the error is returned.
func (s *Sink) appendHeld(dir string, items []hitem, results []sink.Result) (int, error) {
	appended := 0
	rest := items
	rows := make([]row, 0, len(items))
	for len(rest) > 0 {
		seg, err := s.segmentFor(dir)
		if err != nil {
			return appended, s.failHeld(rest, results, err)
		}
		take := min(s.maxRecords-seg.records, len(rest))
		chunk := rest[:take]
		start := time.Now()
		var err2 error
		if s.cfg.Format == "parquet" {
			var est int64
			rows = rows[:0]
			for _, it := range chunk {
				est += it.row.size()
				rows = append(rows, it.row)
			}
			if seg.records > 0 && seg.pw.Size()+est > s.cfg.MaxBytes {
				s.closeLocked(seg, "bytes")
				seg.mu.Unlock()
				continue
			}
			err2 = s.writeRows(seg, rows, chunk)
		} else {
			lines := make([]item, len(chunk))
			for k, it := range chunk {
				lines[k] = item{line: it.line}
			}
			data := s.encode(lines)
			if seg.records > 0 && seg.size+int64(len(data)) > s.cfg.MaxBytes {
				s.closeLocked(seg, "bytes")
				seg.mu.Unlock()
				continue
			}
			// No sync: this copy is not the durable one; the upload is.
			if err2 = pwriteAll(seg.fd, data, seg.size); err2 == nil {
				seg.size += int64(len(data))
			}
		}
		if err := err2; err != nil {
			err = fmt.Errorf("append to segment %s: %w", s.rel(seg.dir, seg.openName(s.ext)), classify(err))
			s.abortLocked(seg, err, "error")
			seg.mu.Unlock()
			return appended, s.failHeld(rest, results, err)
		}
		s.m.appendSeconds.Observe(time.Since(start).Seconds())
		if seg.records == 0 {
			seg.firstAt = s.now()
		}
		s.hs.mu.Lock()
		for _, it := range chunk {
			seq := it.key.seq
			if seg.records == 0 || seq < seg.first {
				seg.first = seq
			}
			if seg.records == 0 || seq > seg.last {
				seg.last = seq
			}
			seg.records++
			seg.keys = append(seg.keys, it.key)
			s.hs.by[it.key] = seg.hold
			results[it.i] = sink.Result{Outcome: sink.Held, Hold: seg.hold}
		}
		s.hs.mu.Unlock()
		appended += take
		if seg.records >= s.maxRecords {
			s.closeLocked(seg, "records")
		}
		seg.mu.Unlock()
		rest = rest[take:]
	}
	return appended, nil
}

// writeRows writes rows into seg, flushing a row group to the file each
// time row_group_records rows have accumulated, so that a segment's rows
// are buffered in memory for at most one row group.
func (s *Sink) writeRows(seg *segment, rows []row, items []hitem) error {
	per := s.cfg.rowGroupRecords()
	for len(rows) > 0 {
		k := min(per-seg.inGroup, len(rows))
		if seg.mw != nil {
			for j := range k {
				if err := seg.mw.Write(s.ms.value(&rows[j], items[j].vals)); err != nil {
					return err
				}
			}
		} else if _, err := seg.gw.Write(rows[:k]); err != nil {
			return err
		}
		rows, items = rows[k:], items[k:]
		if seg.inGroup += k; seg.inGroup >= per {
			if err := seg.pw.Flush(); err != nil {
				return err
			}
			seg.inGroup = 0
		}
	}
	return nil
}

func (s *Sink) failHeld(items []hitem, results []sink.Result, err error) error {
	for _, it := range items {
		results[it.i] = sink.Failed(fmt.Errorf("segments sink (stream seq %d): %w", it.key.seq, err))
	}
	return err
}

// commitLocked closes a held-mode segment and starts its commit, which
// settles its hold; new records of its partition open a new segment
// meanwhile.
func (s *Sink) commitLocked(seg *segment, reason string) {
	if seg.closed {
		return
	}
	seg.closed = true
	s.detach(seg)
	if !s.cs.start() {
		// The shutdown deadline passed: nothing more is committed.
		s.dropClosed(seg, errors.New("segments sink is shutting down"), "shutdown")
		return
	}
	go func() {
		defer s.cs.finish()
		s.commit(seg, reason)
	}()
}

// commit makes a closed held-mode segment durable and settles its hold.
// Local: footer, fsync (with fsync), rename to the final name, directory
// fsync; the rename and the directory sync are retried (1 s doubling to
// 30 s, full jitter) until commit_timeout_ms has passed, a failed footer
// write or file fsync is not, because after a failed fsync the kernel may
// have dropped the dirty pages and a later success would prove nothing.
// s3: the footer, then the upload (retried the same way), then the staging
// file is deleted. A failed commit deletes the open or staging file and
// settles the hold with the error's class (Temporary once shutdown gave up
// on it), so its messages are redelivered.
func (s *Sink) commit(seg *segment, reason string) {
	ctx := s.cs.ctx
	defer func() {
		unix.Close(seg.fd)
		unix.Close(seg.dirfd)
	}()
	name := seg.openName(s.ext)
	if seg.records == 0 {
		_ = unix.Unlinkat(seg.dirfd, name, 0)
		s.settleSegment(seg, sink.Committed, nil)
		return
	}
	start := time.Now()
	size := seg.size
	var err error
	if seg.pw != nil {
		seg.pw.SetKeyValueMetadata("nats_sinks.schema", ParquetSchema)
		seg.pw.SetKeyValueMetadata("nats_sinks.segment_id", seg.id)
		seg.pw.SetKeyValueMetadata("nats_sinks.records", strconv.Itoa(seg.records))
		seg.pw.SetKeyValueMetadata("nats_sinks.first_stream_sequence", strconv.FormatUint(seg.first, 10))
		seg.pw.SetKeyValueMetadata("nats_sinks.last_stream_sequence", strconv.FormatUint(seg.last, 10))
		mj := "[]"
		if s.ms != nil {
			mj = s.ms.json
		}
		seg.pw.SetKeyValueMetadata("nats_sinks.mapping", mj)
		if err = seg.pw.Close(); err != nil {
			err = fmt.Errorf("write footer of segment %s: %w", s.rel(seg.dir, name), classify(err))
		}
		size = seg.out.off
	}
	final := finalNameOf(seg.first, seg.last, seg.id, s.ext)
	switch {
	case err != nil:
	case s.s3 != nil:
		err = s.upload(ctx, seg, s.rel(seg.dir, final), size, start)
		_ = unix.Unlinkat(seg.dirfd, name, 0)
	default:
		if s.cfg.Fsync {
			if err = unix.Fsync(seg.fd); err != nil {
				err = fmt.Errorf("sync segment %s: %w", s.rel(seg.dir, name), classify(err))
			}
		}
		if err == nil {
			renamed := false
			err = s.retry(ctx, start, func() error {
				if !renamed {
					if err := renameNoReplace(seg.dirfd, name, final); err != nil {
						return fmt.Errorf("rename segment %s to %s: %w", s.rel(seg.dir, name), final, classify(err))
					}
					renamed = true
				}
				if s.cfg.Fsync {
					if err := unix.Fsync(seg.dirfd); err != nil {
						return fmt.Errorf("sync directory of segment %s: %w", s.rel(seg.dir, final), classify(err))
					}
				}
				return nil
			})
			if err != nil && renamed {
				name = final // delete what is there, under the name it has
			}
		}
	}
	if err != nil {
		s.log.Warn("segment commit failed; its messages are redelivered", "file", s.rel(seg.dir, name), "error", err)
		if s.s3 == nil {
			_ = unix.Unlinkat(seg.dirfd, name, 0)
			if s.cfg.Fsync {
				_ = unix.Fsync(seg.dirfd)
			}
		}
		s.m.closed.With("error").Add(1)
		s.m.commitFailures.Add(1)
		o := sink.Failed(err).Outcome
		if o == sink.Permanent || ctx.Err() != nil {
			o = sink.Temporary
		}
		s.settleSegment(seg, o, err)
		return
	}
	s.m.closed.With(reason).Add(1)
	s.m.committed.Add(1)
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	s.m.segBytes.Observe(float64(size))
	s.m.segRecords.Observe(float64(seg.records))
	s.settleSegment(seg, sink.Committed, nil)
}

// commitState tracks the commits running in their own goroutines, so that
// Flush can wait for them and, at its deadline, cancel them.
type commitState struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	n       int
	stopped bool
	changed chan struct{} // closed and replaced whenever a commit ends
}

func (c *commitState) init() {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.changed = make(chan struct{})
}

// start counts one more running commit; false once commits were stopped.
func (c *commitState) start() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.n++
	return true
}

func (c *commitState) finish() {
	c.mu.Lock()
	c.n--
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// wait returns once no commit is running, or with ctx's error.
func (c *commitState) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, ch := c.n, c.changed
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop cancels the running commits, refuses new ones and waits for the
// running ones to return (a cancelled request returns at once).
func (c *commitState) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	_ = c.wait(context.Background())
}

// retry runs step until it succeeds, commit_timeout_ms has passed since
// start, or ctx ends; it returns the last error.
func (s *Sink) retry(ctx context.Context, start time.Time, step func() error) error {
	deadline := start.Add(s.cfg.commitTimeout())
	backoff := time.Second
	for {
		err := step()
		if err == nil {
			return nil
		}
		wait := time.Duration(rand.Int64N(int64(backoff)) + 1)
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-s.stop:
			t.Stop()
			return err
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// abortLocked gives up a held-mode segment: the open file is deleted and the
// hold settles with err's class (Temporary unless err says otherwise), so
// its messages are redelivered.
func (s *Sink) abortLocked(seg *segment, err error, reason string) {
	if seg.closed {
		return
	}
	seg.closed = true
	s.detach(seg)
	s.dropClosed(seg, err, reason)
}

// dropClosed deletes the open file of a closed, detached segment and
// settles its hold with err's class (never Permanent).
func (s *Sink) dropClosed(seg *segment, err error, reason string) {
	_ = unix.Unlinkat(seg.dirfd, seg.openName(s.ext), 0)
	if s.cfg.Fsync {
		_ = unix.Fsync(seg.dirfd)
	}
	unix.Close(seg.fd)
	unix.Close(seg.dirfd)
	s.m.closed.With(reason).Add(1)
	if seg.records > 0 {
		s.m.commitFailures.Add(1)
	}
	o := sink.Failed(err).Outcome
	if o == sink.Permanent {
		o = sink.Temporary // a segment is never one message's fault
	}
	s.settleSegment(seg, o, err)
}

func (s *Sink) settleSegment(seg *segment, o sink.Outcome, err error) {
	s.release(seg.records, seg.keys)
	seg.keys = nil
	seg.hold.settle(o, err)
}

// flushHeld commits every open segment (reason shutdown) while ctx lasts;
// the segments it cannot commit by then are abandoned: their holds settle
// Temporary and their messages are redelivered.
func (s *Sink) flushHeld(ctx context.Context) error {
	s.mu.Lock()
	all := make([]*segment, 0, len(s.open))
	for _, seg := range s.open {
		all = append(all, seg)
	}
	s.mu.Unlock()
	for _, seg := range all {
		seg.mu.Lock()
		if err := ctx.Err(); err != nil {
			s.abortLocked(seg, fmt.Errorf("segment %s not committed by the shutdown deadline: %w", s.rel(seg.dir, seg.openName(s.ext)), err), "shutdown")
		} else {
			s.commitLocked(seg, "shutdown")
		}
		seg.mu.Unlock()
	}
	if err := s.cs.wait(ctx); err != nil {
		// The deadline: commits still running are cancelled, and their
		// holds settle Temporary.
		s.cs.stop()
		return err
	}
	return ctx.Err()
}

// abandonAll gives up every open held-mode segment (Stop without Flush).
func (s *Sink) abandonAll() {
	s.mu.Lock()
	all := make([]*segment, 0, len(s.open))
	for _, seg := range s.open {
		all = append(all, seg)
	}
	s.mu.Unlock()
	for _, seg := range all {
		seg.mu.Lock()
		s.abortLocked(seg, errors.New("segments sink stopped before the segment was committed"), "shutdown")
		seg.mu.Unlock()
	}
}

// buildRow builds e's Parquet row.
func (s *Sink) buildRow(e *sink.Envelope, storedAt time.Time) (row, error) {
	p, err := record.NormalisePayload(e, record.PayloadMode(s.cfg.PayloadMode))
	if err != nil {
		return row{}, fmt.Errorf("segments sink (stream seq %d): %w", e.StreamSequence, err)
	}
	key, err := record.CoreKey(e)
	if err != nil {
		return row{}, sink.AsPermanent(fmt.Errorf("segments sink (stream seq %d): %w", e.StreamSequence, err))
	}
	r := row{
		StreamName:     e.Stream,
		Subject:        e.Subject,
		StreamSequence: int64(e.StreamSequence),
		MessageID:      optional(e.MessageID),
		Priority:       optional(e.Priority),
		Classification: optional(e.Classification),
		IdempotencyKey: key,
		Labels:         record.Labels(e),
		ReceivedAt:     e.ReceivedAt.UnixNano(),
		StoredAt:       record.Micro(storedAt).UnixNano(),
		PayloadFormat:  p.Format(),
		Payload:        string(jsonx.Append(nil, p.Value, jsonx.UTF8)),
		HeadersJSON:    string(jsonx.Append(nil, record.Headers(e), jsonx.UTF8)),
	}
	if c := record.CreatedAt(e); !c.Time.IsZero() {
		r.CreatedAt = epochNano(c.Time)
	}
	if !e.Timestamp.IsZero() {
		r.PublishedAt = epochNano(record.JetStreamTime(e.Timestamp))
	}
	if s.cfg.IncludeMetadata {
		m := string(jsonx.Append(nil, record.Metadata(e, storedAt, false), jsonx.UTF8))
		r.MetadataJSON = &m
	}
	return r, nil
}

func optional(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// epochNano returns t's epoch nanoseconds, or nil when they do not fit a
// Parquet INT64 timestamp (before 1677 or after 2262).
func epochNano(t time.Time) *int64 {
	if t.Before(time.Unix(0, -1<<63)) || t.After(time.Unix(0, 1<<63-1)) {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// keyRow is the projection verify reads from a Parquet segment.
type keyRow struct {
	StreamName     string `parquet:"stream_name"`
	StreamSequence int64  `parquet:"stream_sequence"`
}

var rowSchema = parquet.SchemaOf(new(row))

// readParquet reads a final Parquet segment completely and checks it: the
// footer, the fixed columns with their types, every row group, the row
// count against nats_sinks.records and the name's first and last sequence
// against the rows. reason is "" when it is readable.
func readParquet(path, firstS, lastS string) (keys []Key, reason string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err.Error()
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, fmt.Sprintf("parquet: %v", err)
	}
	if v, _ := pf.Lookup("nats_sinks.schema"); v != ParquetSchema {
		return nil, fmt.Sprintf("parquet: nats_sinks.schema is %q, want %q", v, ParquetSchema)
	}
	for _, col := range rowSchema.Columns() {
		want, _ := rowSchema.Lookup(col...)
		got, ok := pf.Schema().Lookup(col...)
		switch {
		case !ok:
			return nil, fmt.Sprintf("parquet: column %s missing", strings.Join(col, "."))
		case got.Node.Type().String() != want.Node.Type().String() || got.Node.Optional() != want.Node.Optional() ||
			got.MaxRepetitionLevel != want.MaxRepetitionLevel:
			return nil, fmt.Sprintf("parquet: column %s is %s, want %s", strings.Join(col, "."), got.Node.Type(), want.Node.Type())
		}
	}
	defer func() {
		// A corrupt page can make the decoder panic; it is one unreadable
		// file, not a crash of the verifier.
		if p := recover(); p != nil {
			keys, reason = nil, fmt.Sprintf("parquet: %v", p)
		}
	}()
	r := parquet.NewGenericReader[keyRow](pf)
	defer r.Close()
	buf := make([]keyRow, 1024)
	var first, last uint64
	for {
		n, err := r.Read(buf)
		for _, k := range buf[:n] {
			seq := uint64(k.StreamSequence)
			if len(keys) == 0 || seq < first {
				first = seq
			}
			if len(keys) == 0 || seq > last {
				last = seq
			}
			keys = append(keys, Key{Stream: k.StreamName, Sequence: seq})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Sprintf("parquet: %v", err)
		}
	}
	if want, _ := pf.Lookup("nats_sinks.records"); want != strconv.Itoa(len(keys)) {
		return nil, fmt.Sprintf("parquet: %d rows, nats_sinks.records says %s", len(keys), want)
	}
	if len(keys) == 0 {
		return nil, "no records"
	}
	if fmt.Sprintf("%020d", first) != firstS || fmt.Sprintf("%020d", last) != lastS {
		return nil, fmt.Sprintf("name says sequences %s-%s, records hold %d-%d", strings.TrimLeft(firstS, "0"), strings.TrimLeft(lastS, "0"), first, last)
	}
	return keys, ""
}
