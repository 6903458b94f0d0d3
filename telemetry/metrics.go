package telemetry

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// A Counter is a monotonically increasing metric. Methods are safe on a nil
// *Counter (no-op), so code never checks whether metrics are enabled.
type Counter struct {
	v       atomic.Uint64
	prom    prometheus.Counter
	changed *atomic.Uint64 // the owning Metrics' change count
}

// Add adds n. A negative n is ignored: a Prometheus counter panics on it,
// and a metrics bug must not take delivery down with it.
func (c *Counter) Add(n int) {
	if c == nil || n <= 0 {
		return
	}
	c.v.Add(uint64(n))
	c.prom.Add(float64(n))
	c.changed.Add(1)
}

// Inc adds 1.
func (c *Counter) Inc() { c.Add(1) }

// Value returns the current count (0 for a nil *Counter).
func (c *Counter) Value() uint64 {
	if c == nil {
		return 0
	}
	return c.v.Load()
}

// A Gauge is a metric that goes up and down. Nil-safe.
type Gauge struct {
	bits    atomic.Uint64 // math.Float64bits of the value
	prom    prometheus.Gauge
	changed *atomic.Uint64
}

// Set sets the value. NaN and ±Inf are ignored: the snapshot is JSON, which
// cannot carry them.
func (g *Gauge) Set(v float64) {
	if g == nil || !finite(v) {
		return
	}
	g.bits.Store(math.Float64bits(v))
	g.prom.Set(v)
	g.changed.Add(1)
}

// Add adds v (may be negative). Non-finite values are ignored.
func (g *Gauge) Add(v float64) {
	if g == nil || !finite(v) {
		return
	}
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	g.prom.Add(v)
	g.changed.Add(1)
}

// Value returns the current value (0 for a nil *Gauge).
func (g *Gauge) Value() float64 {
	if g == nil {
		return 0
	}
	return math.Float64frombits(g.bits.Load())
}

// A Histogram observes values (seconds unless named otherwise). It feeds a
// Prometheus histogram and keeps the count/sum/min/max/last summary the
// snapshot file reports. Nil-safe.
type Histogram struct {
	prom    prometheus.Histogram
	changed *atomic.Uint64

	mu  sync.Mutex
	sum Summary
}

// Summary is the snapshot view of a histogram's observations. All fields are
// zero when nothing has been observed.
type Summary struct {
	Count, Sum, Min, Max, Last float64
}

// Observe records one value. Non-finite values are ignored.
func (h *Histogram) Observe(v float64) {
	if h == nil || !finite(v) {
		return
	}
	h.mu.Lock()
	s := &h.sum
	if s.Count == 0 || v < s.Min {
		s.Min = v
	}
	if s.Count == 0 || v > s.Max {
		s.Max = v
	}
	s.Count++
	s.Sum += v
	s.Last = v
	h.mu.Unlock()
	h.prom.Observe(v)
	h.changed.Add(1)
}

// Summary returns the observations so far (zero for a nil *Histogram).
func (h *Histogram) Summary() Summary {
	if h == nil {
		return Summary{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sum
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// LatencyBuckets returns the bucket bounds of the latency histograms
// (docs/observability.md#metrics).
func LatencyBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// BackoffBuckets returns the bucket bounds of retry_backoff_delay_seconds.
func BackoffBuckets() []float64 {
	return []float64{0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600}
}

// AgeBuckets returns the bucket bounds of the event age and clock-skew
// histograms.
func AgeBuckets() []float64 {
	return []float64{0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 21600, 86400}
}

// Metrics holds every core metric of docs/observability.md#metrics. Field names are
// the metric names in CamelCase without the namespace. Use NewMetrics: a
// Metrics literal has nil (no-op) metrics and a Snapshot of zeros.
type Metrics struct {
	MessagesFetched            *Counter // messages_fetched_total
	BatchesFetched             *Counter // batches_fetched_total
	MessagesPrepared           *Counter // messages_prepared_total (+ snapshot alias messages_received_total)
	MessagesWritten            *Counter // messages_written_total
	MessagesAcked              *Counter // messages_acked_total
	MessagesTerminated         *Counter // messages_terminated_total
	MessagesNacked             *Counter // messages_nacked_total
	MessagesFailed             *Counter // messages_failed_total
	MessagesDLQ                *Counter // messages_dlq_total
	SinkBatchesWritten         *Counter // sink_batches_written_total (+ alias batches_written_total)
	SinkWriteErrors            *Counter // sink_write_errors_total
	MessageNormalizationErrors *Counter // message_normalization_errors_total
	PayloadEncryptionErrors    *Counter // payload_encryption_errors_total
	AuthenticityPassed         *Counter // message_authenticity_messages_passed_total
	AuthenticityRejected       *Counter // message_authenticity_messages_rejected_total
	AuthenticityBatchesPassed  *Counter // message_authenticity_batches_passed_total
	AuthenticityBatchesReject  *Counter // message_authenticity_batches_rejected_total
	AuthenticityEvalErrors     *Counter // message_authenticity_evaluation_errors_total
	DLQPublishErrors           *Counter // dlq_publish_errors_total
	AckErrors                  *Counter // ack_errors_total
	TermErrors                 *Counter // term_errors_total
	AckConfirmationAttempts    *Counter // ack_confirmation_attempts_total
	AckConfirmationSuccesses   *Counter // ack_confirmation_successes_total
	AckConfirmationTimeouts    *Counter // ack_confirmation_timeouts_total
	AckConfirmationFailures    *Counter // ack_confirmation_failures_total
	AckConfirmationUnsupported *Counter // ack_confirmation_unsupported_total
	InProgressAttempts         *Counter // in_progress_attempts_total
	InProgressSuccesses        *Counter // in_progress_successes_total
	InProgressFailures         *Counter // in_progress_failures_total
	InProgressMaxHeartbeats    *Counter // in_progress_max_heartbeats_reached_total
	NATSDisconnected           *Counter // nats_connection_disconnected_total
	NATSReconnected            *Counter // nats_connection_reconnected_total
	NATSClosed                 *Counter // nats_connection_closed_total
	NATSDiscoveredServers      *Counter // nats_discovered_servers_total
	NATSAsyncErrors            *Counter // nats_async_errors_total
	PriorityLaneBatches        *Counter // priority_lane_batches_total
	PriorityLaneMessages       *Counter // priority_lane_messages_total
	PriorityLaneDefaulted      *Counter // priority_lane_defaulted_total
	PriorityLaneRejected       *Counter // priority_lane_rejected_total
	EventsStaleAtReceive       *Counter // events_stale_at_receive_total
	EventsStaleAtStore         *Counter // events_stale_at_store_total
	EventCreationMissing       *Counter // event_creation_timestamp_missing_total
	EventCreationMalformed     *Counter // event_creation_timestamp_malformed_total
	EventCreationFuture        *Counter // event_creation_timestamp_future_total
	SinkBatchBisections        *Counter // sink_batch_bisections_total
	SinkDestinationErrors      *Counter // sink_destination_errors_total
	DLQPublishDuplicates       *Counter // dlq_publish_duplicates_total
	ShutdownAbandonedMessages  *Counter // shutdown_abandoned_messages_total
	MessagesMaxDeliverReached  *Counter // messages_max_deliver_reached_total

	NATSFetchSeconds            *Histogram // nats_fetch_seconds
	MessageMappingSeconds       *Histogram // message_mapping_seconds
	SinkBatchWriteSeconds       *Histogram // sink_batch_write_seconds (+ alias batch_write_seconds)
	MessageAckSeconds           *Histogram // message_ack_seconds
	MessageTermSeconds          *Histogram // message_term_seconds
	AckConfirmationSeconds      *Histogram // ack_confirmation_seconds
	InProgressHeartbeatSeconds  *Histogram // in_progress_heartbeat_seconds
	RetryBackoffDelaySeconds    *Histogram // retry_backoff_delay_seconds
	EventAgeAtReceiveSeconds    *Histogram // event_age_at_receive_seconds
	EventAgeAtStoreSeconds      *Histogram // event_age_at_store_seconds
	EventSourceClockSkewSeconds *Histogram // event_source_clock_skew_seconds

	CurrentBatchMessages        *Gauge // current_batch_messages (+ alias current_batch_size)
	CurrentInProgressBatches    *Gauge // current_in_progress_batches_active
	CurrentPriorityLanesActive  *Gauge // current_priority_lanes_active
	LastSinkSuccessEpochSeconds *Gauge // last_sink_success_epoch_seconds (+ alias last_success_timestamp)
	CurrentBatchesInFlight      *Gauge // current_batches_in_flight
	NATSConnected               *Gauge // nats_connected
	SinkHealthy                 *Gauge // sink_healthy
	SinkCircuitOpen             *Gauge // sink_circuit_open
	ConsumerNumPending          *Gauge // consumer_num_pending
	ConsumerNumAckPending       *Gauge // consumer_num_ack_pending
	ConsumerNumRedelivered      *Gauge // consumer_num_redelivered
	ConsumerNumWaiting          *Gauge // consumer_num_waiting
	OldestInFlightBatchSeconds  *Gauge // oldest_in_flight_batch_seconds
	HeldMessages                *Gauge // held_messages
	OldestHeldMessageSeconds    *Gauge // oldest_held_message_seconds

	namespace string
	reg       prometheus.Registerer
	// changes counts every update; SnapshotWriter skips rewriting an
	// unchanged document.
	changes atomic.Uint64

	mu     sync.Mutex // guards extras
	extras extras
}

// extras are sink-specific metrics (sinks.md), created after NewMetrics.
type extras struct {
	counters    []named[*Counter]
	gauges      []named[*Gauge]
	histograms  []named[*Histogram]
	counterVecs []named[*CounterVec]
}

type named[T any] struct {
	name string
	m    T
}

type counterSpec struct {
	name, help string
	p          **Counter
}

type gaugeSpec struct {
	name, help string
	p          **Gauge
}

type histogramSpec struct {
	name, help string
	buckets    []float64
	p          **Histogram
}

// counterSpecs lists the core counters in the order of docs/observability.md#metrics.
// Both NewMetrics and Snapshot walk it, so a metric cannot be created
// without appearing in the snapshot.
func (m *Metrics) counterSpecs() []counterSpec {
	return []counterSpec{
		{"messages_fetched_total", "Messages returned by fetches.", &m.MessagesFetched},
		{"batches_fetched_total", "Non-empty fetches.", &m.BatchesFetched},
		{"messages_prepared_total", "Messages handed to the write step.", &m.MessagesPrepared},
		{"messages_written_total", "Messages committed or already present.", &m.MessagesWritten},
		{"messages_acked_total", "ACKs accepted (after commit or DLQ).", &m.MessagesAcked},
		{"messages_terminated_total", "TERMs sent after DLQ.", &m.MessagesTerminated},
		{"messages_nacked_total", "NAKs sent.", &m.MessagesNacked},
		{"messages_failed_total", "Messages that entered a failure path.", &m.MessagesFailed},
		{"messages_dlq_total", "DLQ publishes acknowledged.", &m.MessagesDLQ},
		{"sink_batches_written_total", "Write calls that committed at least one message.", &m.SinkBatchesWritten},
		{"sink_write_errors_total", "Messages failed by the sink.", &m.SinkWriteErrors},
		{"message_normalization_errors_total", "Messages failed while building envelopes.", &m.MessageNormalizationErrors},
		{"payload_encryption_errors_total", "Messages failed in encryption.", &m.PayloadEncryptionErrors},
		{"message_authenticity_messages_passed_total", "Messages accepted by message authenticity (verified, exempt, or unmatched and allowed).", &m.AuthenticityPassed},
		{"message_authenticity_messages_rejected_total", "Messages rejected by message authenticity.", &m.AuthenticityRejected},
		{"message_authenticity_batches_passed_total", "Batches with at least one message accepted by message authenticity.", &m.AuthenticityBatchesPassed},
		{"message_authenticity_batches_rejected_total", "Batches with at least one message rejected by message authenticity.", &m.AuthenticityBatchesReject},
		{"message_authenticity_evaluation_errors_total", "Messages sent to the temporary path by an unexpected authenticity evaluation error.", &m.AuthenticityEvalErrors},
		{"dlq_publish_errors_total", "Failed DLQ publishes.", &m.DLQPublishErrors},
		{"ack_errors_total", "Failed ACKs.", &m.AckErrors},
		{"term_errors_total", "Failed TERMs.", &m.TermErrors},
		{"ack_confirmation_attempts_total", "Confirmed ACK attempts.", &m.AckConfirmationAttempts},
		{"ack_confirmation_successes_total", "Confirmed ACK successes.", &m.AckConfirmationSuccesses},
		{"ack_confirmation_timeouts_total", "Confirmed ACK timeouts.", &m.AckConfirmationTimeouts},
		{"ack_confirmation_failures_total", "Confirmed ACK failures.", &m.AckConfirmationFailures},
		{"ack_confirmation_unsupported_total", "Confirmed ACKs not supported.", &m.AckConfirmationUnsupported},
		{"in_progress_attempts_total", "InProgress heartbeat attempts.", &m.InProgressAttempts},
		{"in_progress_successes_total", "InProgress heartbeat successes.", &m.InProgressSuccesses},
		{"in_progress_failures_total", "InProgress heartbeat failures.", &m.InProgressFailures},
		{"in_progress_max_heartbeats_reached_total", "Batches that reached the heartbeat limit.", &m.InProgressMaxHeartbeats},
		{"nats_connection_disconnected_total", "NATS disconnections.", &m.NATSDisconnected},
		{"nats_connection_reconnected_total", "NATS reconnections.", &m.NATSReconnected},
		{"nats_connection_closed_total", "NATS connection closes.", &m.NATSClosed},
		{"nats_discovered_servers_total", "NATS servers discovered.", &m.NATSDiscoveredServers},
		{"nats_async_errors_total", "NATS asynchronous errors.", &m.NATSAsyncErrors},
		{"priority_lane_batches_total", "Priority lane batches.", &m.PriorityLaneBatches},
		{"priority_lane_messages_total", "Priority lane messages.", &m.PriorityLaneMessages},
		{"priority_lane_defaulted_total", "Messages given the default priority lane.", &m.PriorityLaneDefaulted},
		{"priority_lane_rejected_total", "Messages rejected by priority lanes.", &m.PriorityLaneRejected},
		{"events_stale_at_receive_total", "Events at least event_stale_after_seconds old when received.", &m.EventsStaleAtReceive},
		{"events_stale_at_store_total", "Events at least event_stale_after_seconds old when stored.", &m.EventsStaleAtStore},
		{"event_creation_timestamp_missing_total", "Messages without a creation time.", &m.EventCreationMissing},
		{"event_creation_timestamp_malformed_total", "Messages with a malformed Nats-Time-Stamp.", &m.EventCreationMalformed},
		{"event_creation_timestamp_future_total", "Creation times beyond the future-skew tolerance.", &m.EventCreationFuture},
		{"sink_batch_bisections_total", "Splits made by permanent-failure isolation.", &m.SinkBatchBisections},
		{"sink_destination_errors_total", "Messages failed with the destination class.", &m.SinkDestinationErrors},
		{"dlq_publish_duplicates_total", "DLQ PubAcks flagged duplicate.", &m.DLQPublishDuplicates},
		{"shutdown_abandoned_messages_total", "Messages NAKed because the drain timed out.", &m.ShutdownAbandonedMessages},
		{"messages_max_deliver_reached_total", "Last-delivery failures without a DLQ.", &m.MessagesMaxDeliverReached},
	}
}

func (m *Metrics) histogramSpecs() []histogramSpec {
	lat, backoff, age := LatencyBuckets(), BackoffBuckets(), AgeBuckets()
	return []histogramSpec{
		{"nats_fetch_seconds", "Fetch duration.", lat, &m.NATSFetchSeconds},
		{"message_mapping_seconds", "Envelope building per batch.", lat, &m.MessageMappingSeconds},
		{"sink_batch_write_seconds", "Successful sink write calls.", lat, &m.SinkBatchWriteSeconds},
		{"message_ack_seconds", "ACK pass per batch.", lat, &m.MessageAckSeconds},
		{"message_term_seconds", "TERM pass per batch.", lat, &m.MessageTermSeconds},
		{"ack_confirmation_seconds", "Confirmed ACK duration.", lat, &m.AckConfirmationSeconds},
		{"in_progress_heartbeat_seconds", "InProgress heartbeat duration.", lat, &m.InProgressHeartbeatSeconds},
		{"retry_backoff_delay_seconds", "Chosen NAK delays.", backoff, &m.RetryBackoffDelaySeconds},
		{"event_age_at_receive_seconds", "Event age when received.", age, &m.EventAgeAtReceiveSeconds},
		{"event_age_at_store_seconds", "Event age when stored.", age, &m.EventAgeAtStoreSeconds},
		{"event_source_clock_skew_seconds", "Positive source clock skew.", age, &m.EventSourceClockSkewSeconds},
	}
}

func (m *Metrics) gaugeSpecs() []gaugeSpec {
	return []gaugeSpec{
		{"current_batch_messages", "Messages in the current batch.", &m.CurrentBatchMessages},
		{"current_in_progress_batches_active", "Batches with active InProgress heartbeats.", &m.CurrentInProgressBatches},
		{"current_priority_lanes_active", "Active priority lanes.", &m.CurrentPriorityLanesActive},
		{"last_sink_success_epoch_seconds", "Unix time of the latest commit-then-ACK.", &m.LastSinkSuccessEpochSeconds},
		{"current_batches_in_flight", "In-flight slots holding messages (fetched, not yet settled); a waiting fetch does not count.", &m.CurrentBatchesInFlight},
		{"nats_connected", "1 while connected to NATS.", &m.NATSConnected},
		{"sink_healthy", "1 while the sink is not in the destination-error state.", &m.SinkHealthy},
		{"sink_circuit_open", "1 while the destination circuit is open.", &m.SinkCircuitOpen},
		{"consumer_num_pending", "Consumer messages pending (from consumer info).", &m.ConsumerNumPending},
		{"consumer_num_ack_pending", "Consumer messages awaiting ACK (from consumer info).", &m.ConsumerNumAckPending},
		{"consumer_num_redelivered", "Consumer redelivered messages (from consumer info).", &m.ConsumerNumRedelivered},
		{"consumer_num_waiting", "Consumer waiting pull requests (from consumer info).", &m.ConsumerNumWaiting},
		{"oldest_in_flight_batch_seconds", "Age of the oldest batch not yet settled.", &m.OldestInFlightBatchSeconds},
		{"held_messages", "Messages a sink holds unacknowledged until their segment commits.", &m.HeldMessages},
		{"oldest_held_message_seconds", "Age of the oldest held message.", &m.OldestHeldMessageSeconds},
	}
}

// NewMetrics creates every metric under namespace and registers them on reg.
// A nil reg creates working but unregistered metrics (tests, library use).
// On a registration error (such as a name already registered) nothing stays
// registered and the error is returned.
func NewMetrics(reg prometheus.Registerer, namespace string) (*Metrics, error) {
	m := &Metrics{namespace: namespace, reg: reg}
	var cs []prometheus.Collector
	for _, s := range m.counterSpecs() {
		*s.p = m.newCounter(s.name, s.help)
		cs = append(cs, (*s.p).prom)
	}
	for _, s := range m.histogramSpecs() {
		*s.p = m.newHistogram(s.name, s.help, s.buckets)
		cs = append(cs, (*s.p).prom)
	}
	for _, s := range m.gaugeSpecs() {
		*s.p = m.newGauge(s.name, s.help)
		cs = append(cs, (*s.p).prom)
	}
	if err := register(reg, cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers every collector or, on the first error, none.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

func (m *Metrics) newCounter(name, help string) *Counter {
	return &Counter{
		prom:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.namespace, Name: name, Help: help}),
		changed: &m.changes,
	}
}

func (m *Metrics) newGauge(name, help string) *Gauge {
	return &Gauge{
		prom:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: m.namespace, Name: name, Help: help}),
		changed: &m.changes,
	}
}

func (m *Metrics) newHistogram(name, help string, buckets []float64) *Histogram {
	return &Histogram{
		prom: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: m.namespace, Name: name, Help: help, Buckets: buckets,
		}),
		changed: &m.changes,
	}
}

// Namespace returns the namespace the metrics were created under.
func (m *Metrics) Namespace() string {
	if m == nil {
		return ""
	}
	return m.namespace
}

// NewCounter creates a sink-specific counter (each sink's page in docs/, e.g.
// "postgres_duplicates_total") under the same namespace and registerer, and
// includes it in the snapshot. Labelled metrics are not supported here. A nil
// *Metrics returns a nil (no-op) counter. Asking again for a sink metric of the
// same kind returns the existing one, so that two sinks of one type given the
// same Metrics (a library program) add to one collector; a name taken by a
// core metric or by a metric of another kind is an error.
func (m *Metrics) NewCounter(name, help string) (*Counter, error) {
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.extras.counters {
		if e.name == name {
			return e.m, nil
		}
	}
	if err := m.checkFree(name); err != nil {
		return nil, err
	}
	c := m.newCounter(name, help)
	if err := register(m.reg, c.prom); err != nil {
		return nil, err
	}
	m.extras.counters = append(m.extras.counters, named[*Counter]{name, c})
	return c, nil
}

// NewGauge creates a sink-specific gauge; see NewCounter.
func (m *Metrics) NewGauge(name, help string) (*Gauge, error) {
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.extras.gauges {
		if e.name == name {
			return e.m, nil
		}
	}
	if err := m.checkFree(name); err != nil {
		return nil, err
	}
	g := m.newGauge(name, help)
	if err := register(m.reg, g.prom); err != nil {
		return nil, err
	}
	m.extras.gauges = append(m.extras.gauges, named[*Gauge]{name, g})
	return g, nil
}

// NewHistogram creates a sink-specific histogram; nil buckets means
// LatencyBuckets. See NewCounter.
func (m *Metrics) NewHistogram(name, help string, buckets []float64) (*Histogram, error) {
	if m == nil {
		return nil, nil
	}
	if buckets == nil {
		buckets = LatencyBuckets()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.extras.histograms {
		if e.name == name {
			return e.m, nil
		}
	}
	if err := m.checkFree(name); err != nil {
		return nil, err
	}
	h := m.newHistogram(name, help, buckets)
	if err := register(m.reg, h.prom); err != nil {
		return nil, err
	}
	m.extras.histograms = append(m.extras.histograms, named[*Histogram]{name, h})
	return h, nil
}

// checkFree rejects a name already used in this Metrics, which matters even
// without a registerer: the snapshot keys must be unique.
func (m *Metrics) checkFree(name string) error {
	taken := func() bool {
		for _, s := range m.counterSpecs() {
			if s.name == name {
				return true
			}
		}
		for _, s := range m.histogramSpecs() {
			if s.name == name {
				return true
			}
		}
		for _, s := range m.gaugeSpecs() {
			if s.name == name {
				return true
			}
		}
		for _, n := range snapshotAliases() {
			if n == name {
				return true
			}
		}
		for _, e := range m.extras.counters {
			if e.name == name {
				return true
			}
		}
		for _, e := range m.extras.gauges {
			if e.name == name {
				return true
			}
		}
		for _, e := range m.extras.histograms {
			if e.name == name {
				return true
			}
		}
		for _, e := range m.extras.counterVecs {
			if e.name == name {
				return true
			}
		}
		return false
	}
	if taken() {
		return fmt.Errorf("metric %q already exists", name)
	}
	return nil
}
