package segments

import "github.com/nats-sinks/nats-sink/sink"

var (
	byteBuckets   = []float64{64 << 10, 1 << 20, 8 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30, 4 << 30}
	recordBuckets = []float64{100, 1e3, 1e4, 5e4, 1e5, 5e5, 1e6, 1e7}
)

// metrics are the sink's instruments; a registration error leaves a
// working no-op (a metric never stops data).
type metrics struct {
	open          sink.Gauge
	segBytes      sink.Histogram
	segRecords    sink.Histogram
	committed     sink.Counter
	closed        sink.CounterVec
	commitSeconds sink.Histogram
	appendSeconds sink.Histogram
	truncations   sink.Counter
	recovered     sink.Counter
	discarded     sink.Counter

	commitFailures sink.Counter
}

func newMetrics(m sink.Metrics) metrics {
	var x metrics
	x.open, _ = m.Gauge("segments_open", "Open segments.")
	x.segBytes, _ = m.Histogram("segment_bytes", "Size in bytes of each committed segment.", byteBuckets)
	x.segRecords, _ = m.Histogram("segment_records", "Records in each committed segment.", recordBuckets)
	x.committed, _ = m.Counter("segments_committed_total", "Segments committed (renamed to their final name).")
	x.closed, _ = m.CounterVec("segments_closed_total", "Segments closed, by reason.", "reason")
	x.commitSeconds, _ = m.Histogram("segment_commit_seconds", "Close to durable final name of one segment.", nil)
	x.appendSeconds, _ = m.Histogram("segment_append_seconds", "Write and fdatasync of one append.", nil)
	x.truncations, _ = m.Counter("segment_recovered_truncations_total", "Torn segment tails truncated at start-up.")
	x.recovered, _ = m.Counter("segment_recovered_total", "Open segments finished (renamed) at start-up.")
	x.discarded, _ = m.Counter("segment_recovered_discarded_total", "Open segments deleted at start-up.")
	x.commitFailures, _ = m.Counter("segment_commit_failures_total", "Segment holds settled Temporary or Destination.")
	return x
}
