package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// SnapshotSchema is the "schema" value of the snapshot document.
const SnapshotSchema = "nats_sinks.metrics.snapshot.v1"

// snapshotAliases are the snapshot-only legacy names of docs/observability.md#metrics.
func snapshotAliases() []string {
	return []string{
		"messages_received_total", "batches_written_total", "batch_write_seconds",
		"last_success_timestamp", "current_batch_size",
	}
}

// Snapshot returns the metrics snapshot document of docs/formats.md#metrics-snapshot: ascii
// compact canonical JSON followed by "\n". Names are un-prefixed; the legacy
// aliases carry the value of their canonical metric. Counters are integers,
// gauges and summary fields floats. build_info is not included: it is a
// labelled constant, and the snapshot schema has no place for labels.
func (m *Metrics) Snapshot(now time.Time) []byte {
	if m == nil {
		m = &Metrics{}
	}
	counters := map[string]any{}
	for _, s := range m.counterSpecs() {
		counters[s.name] = (*s.p).Value()
	}
	counters["messages_received_total"] = m.MessagesPrepared.Value()
	counters["batches_written_total"] = m.SinkBatchesWritten.Value()

	gauges := map[string]any{}
	for _, s := range m.gaugeSpecs() {
		gauges[s.name] = jsonFloat((*s.p).Value())
	}
	gauges["last_success_timestamp"] = jsonFloat(m.LastSinkSuccessEpochSeconds.Value())
	gauges["current_batch_size"] = jsonFloat(m.CurrentBatchMessages.Value())

	obs := map[string]any{}
	for _, s := range m.histogramSpecs() {
		obs[s.name] = summaryJSON((*s.p).Summary())
	}
	obs["batch_write_seconds"] = summaryJSON(m.SinkBatchWriteSeconds.Summary())

	m.mu.Lock()
	for _, e := range m.extras.counters {
		counters[e.name] = e.m.Value()
	}
	for _, e := range m.extras.gauges {
		gauges[e.name] = jsonFloat(e.m.Value())
	}
	for _, e := range m.extras.histograms {
		obs[e.name] = summaryJSON(e.m.Summary())
	}
	for _, e := range m.extras.counterVecs {
		for k, n := range e.m.values() {
			counters[k] = n
		}
	}
	m.mu.Unlock()

	doc := map[string]any{
		"counters":                   counters,
		"gauges":                     gauges,
		"generated_at_epoch_seconds": jsonFloat(float64(now.Unix()) + float64(now.Nanosecond())/1e9),
		"namespace":                  m.namespace,
		"observations":               obs,
		"schema":                     SnapshotSchema,
	}
	return append(jsonx.Marshal(doc, jsonx.ASCII), '\n')
}

func summaryJSON(s Summary) map[string]any {
	return map[string]any{
		"count": jsonFloat(s.Count),
		"last":  jsonFloat(s.Last),
		"max":   jsonFloat(s.Max),
		"min":   jsonFloat(s.Min),
		"sum":   jsonFloat(s.Sum),
	}
}

// jsonFloat keeps a value the encoder can write. Inputs are filtered for
// NaN and ±Inf already, but a sum can still overflow to ±Inf, and the
// encoder panics on non-finite floats.
func jsonFloat(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}

// A SnapshotWriter keeps the metrics snapshot file (docs/formats.md#metrics-snapshot) up to
// date. Set the fields, then call Run.
type SnapshotWriter struct {
	Metrics *Metrics     // required
	Path    string       // required: metrics.snapshot_file
	Logger  *slog.Logger // nil means no logging of write failures
	Now     func() time.Time
}

// snapshotInterval is the minimum time between two rewrites (spec Q21).
const snapshotInterval = time.Second

// Run writes the snapshot at once, then rewrites it at most once per second,
// and only when a metric changed since the last write (upstream rewrote on
// every update; Q21 throttles that, so an idle process does not fsync every
// second). When ctx ends, Run writes a final snapshot and returns that
// write's error. Write failures while running are logged and retried on the
// next tick; they never affect delivery, and callers should only log the
// returned error.
func (w *SnapshotWriter) Run(ctx context.Context) error {
	written, err := w.write()
	if err != nil {
		w.logFailure(err)
	}
	t := time.NewTicker(snapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_, err := w.write()
			return err
		case <-t.C:
			if w.Metrics.changeCount() == written && err == nil {
				continue
			}
			var n uint64
			if n, err = w.write(); err != nil {
				w.logFailure(err)
				continue
			}
			written = n
		}
	}
}

// Write writes the snapshot file once, now.
func (w *SnapshotWriter) Write() error {
	_, err := w.write()
	return err
}

// write returns the change count the written document reflects (read before
// the document is built, so an update racing with it causes another write).
func (w *SnapshotWriter) write() (uint64, error) {
	n := w.Metrics.changeCount()
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	if err := WriteFileAtomic(w.Path, w.Metrics.Snapshot(now()), 0o600); err != nil {
		return n, fmt.Errorf("write metrics snapshot: %w", err)
	}
	return n, nil
}

func (w *SnapshotWriter) logFailure(err error) {
	if w.Logger != nil {
		w.Logger.Warn("metrics snapshot write failed", "file", w.Path, "error", err.Error())
	}
}

func (m *Metrics) changeCount() uint64 {
	if m == nil {
		return 0
	}
	return m.changes.Load()
}

// WriteFileAtomic replaces path with data so that a reader sees either the
// old or the new content, never a torn file: it writes a temporary file in
// the same directory (rename is atomic only within one file system), fsyncs
// it, renames it over path and fsyncs the directory so the rename survives a
// crash. The file gets exactly perm, whatever the umask.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil // the file is in place; only the rename's durability is unconfirmed
	}
	defer d.Close()
	d.Sync() // best effort: some file systems reject fsync on directories
	return nil
}
