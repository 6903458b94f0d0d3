package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/sink"
)

// Consumer-management modes (consumer_management.mode).
const (
	ModeBindOnly        = "bind_only"
	ModeCreateIfMissing = "create_if_missing"
	ModeReconcile       = "reconcile"
)

// Actions EnsureConsumer reports (the "consumer ready" log record).
const (
	ActionCreated    = "created"
	ActionBound      = "bound"
	ActionReconciled = "reconciled"
	ActionEphemeral  = "ephemeral"
)

// ephemeralInactiveThreshold is how long the server keeps an ephemeral
// consumer without pull requests (docs/delivery.md#consumer-management).
const ephemeralInactiveThreshold = 5 * time.Minute

// A ConfigError is a start-up problem found against the server that the CLI
// reports as a configuration error (exit 2, docs/migrating.md Q19): consumer drift, a
// missing bind_only consumer, a missing DLQ stream.
type ConfigError struct {
	Path    string // JSON path of the configuration key, e.g. "dead_letter.subject"
	Message string
}

// Error returns "<path>: <message>", the docs/configuration.md#how-a-file-is-loaded problem line.
func (e *ConfigError) Error() string { return e.Path + ": " + e.Message }

// Is reports that a ConfigError is a configuration error:
// errors.Is(err, sink.ErrConfig) holds for it.
func (e *ConfigError) Is(target error) bool { return target == sink.ErrConfig }

// ConsumerSpec is the consumer configuration of docs/configuration.md#nats that
// EnsureConsumer needs. Zero values mean the config defaults; nil optional
// fields are "not configured" and neither set on create nor checked for drift.
type ConsumerSpec struct {
	Stream string // nats.stream
	Name   string // nats.consumer
	// Subject is nats.subject, the filter when FilterSubjects is empty.
	Subject string
	// Ephemeral creates an ephemeral consumer (nats.durable false).
	Ephemeral bool
	// Mode is bind_only, create_if_missing (default, "") or reconcile.
	Mode           string
	FilterSubjects []string
	// DeliverPolicy is all (default), last, new or last_per_subject.
	DeliverPolicy string
	// ReplayPolicy is instant (default) or original.
	ReplayPolicy  string
	AckWait       *time.Duration
	MaxDeliver    *int
	BackOff       []time.Duration // nil = not configured
	MaxAckPending *int
	MaxWaiting    *int
	HeadersOnly   *bool
	Replicas      *int
	MemoryStorage *bool
	Metadata      map[string]string // nil or empty = not configured
}

func (s ConsumerSpec) filters() []string {
	if len(s.FilterSubjects) > 0 {
		return s.FilterSubjects
	}
	return []string{s.Subject}
}

func deliverPolicy(s string) (jetstream.DeliverPolicy, error) {
	switch s {
	case "", "all":
		return jetstream.DeliverAllPolicy, nil
	case "last":
		return jetstream.DeliverLastPolicy, nil
	case "new":
		return jetstream.DeliverNewPolicy, nil
	case "last_per_subject":
		return jetstream.DeliverLastPerSubjectPolicy, nil
	}
	return 0, &ConfigError{"consumer_management.deliver_policy", fmt.Sprintf("must be one of all, last, new, last_per_subject (got %q)", s)}
}

func replayPolicy(s string) (jetstream.ReplayPolicy, error) {
	switch s {
	case "", "instant":
		return jetstream.ReplayInstantPolicy, nil
	case "original":
		return jetstream.ReplayOriginalPolicy, nil
	}
	return 0, &ConfigError{"consumer_management.replay_policy", fmt.Sprintf("must be one of instant, original (got %q)", s)}
}

// Desired returns the consumer configuration of docs/delivery.md#consumer-management (for an
// ephemeral spec, docs/delivery.md#consumer-management).
func (s ConsumerSpec) Desired() (jetstream.ConsumerConfig, error) {
	dp, err := deliverPolicy(s.DeliverPolicy)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	rp, err := replayPolicy(s.ReplayPolicy)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	c := jetstream.ConsumerConfig{
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: dp,
		ReplayPolicy:  rp,
	}
	if s.Ephemeral {
		c.InactiveThreshold = ephemeralInactiveThreshold
	} else {
		c.Name, c.Durable = s.Name, s.Name
	}
	if f := s.filters(); len(f) == 1 {
		c.FilterSubject = f[0]
	} else {
		c.FilterSubjects = slices.Clone(f)
	}
	if s.AckWait != nil {
		c.AckWait = *s.AckWait
	}
	if s.MaxDeliver != nil {
		c.MaxDeliver = *s.MaxDeliver
	}
	if s.BackOff != nil {
		c.BackOff = slices.Clone(s.BackOff)
	}
	if s.MaxAckPending != nil {
		c.MaxAckPending = *s.MaxAckPending
	}
	if s.MaxWaiting != nil {
		c.MaxWaiting = *s.MaxWaiting
	}
	if s.HeadersOnly != nil {
		c.HeadersOnly = *s.HeadersOnly
	}
	if s.Replicas != nil {
		c.Replicas = *s.Replicas
	}
	if s.MemoryStorage != nil {
		c.MemoryStorage = *s.MemoryStorage
	}
	if len(s.Metadata) > 0 {
		c.Metadata = make(map[string]string, len(s.Metadata))
		for k, v := range s.Metadata {
			c.Metadata[k] = v
		}
	}
	return c, nil
}

// EnsureConsumer binds, creates or reconciles the pull consumer (runtime
// docs/delivery.md#consumer-management) and returns it with the action taken: "created", "bound",
// "reconciled" or "ephemeral". Problems the operator must fix (drift, a
// missing bind_only consumer, a reconcile update the server refuses) are
// *ConfigError; other errors are runtime failures.
//
// In reconcile mode a consumer whose immutable settings match but whose
// mutable ones differ is updated with its current server configuration,
// only the configured fields of docs/delivery.md#consumer-management overwritten, then read back and
// checked again: sending docs/delivery.md#consumer-management alone would reset every unconfigured field
// to the server default (and a reset max_waiting is refused as an
// immutable change).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, string, error) {
	desired, err := spec.Desired()
	if err != nil {
		return nil, "", err
	}
	// Before anything is created or updated: a server that does not know
	// a configured field ignores it and creates something else.
	if err := checkServer(ctx, js, spec); err != nil {
		return nil, "", err
	}
	if spec.Ephemeral {
		c, err := js.CreateConsumer(ctx, spec.Stream, desired)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, "", streamMissing(spec.Stream)
		}
		if errors.Is(err, jetstream.ErrConsumerMultipleFilterSubjectsNotSupported) {
			return nil, "", createdOtherwise(ctx, js, spec, []driftItem{{field: "filter_subjects", expected: fmtSet(spec.filters()), actual: "[]"}})
		}
		if err != nil {
			return nil, "", fmt.Errorf("create ephemeral consumer on stream %q: %w", spec.Stream, err)
		}
		if items := drift(spec, c.CachedInfo().Config); len(items) > 0 {
			return nil, "", createdOtherwise(ctx, js, spec, items)
		}
		return c, ActionEphemeral, nil
	}
	switch spec.Mode {
	case "", ModeCreateIfMissing, ModeBindOnly, ModeReconcile:
	default:
		return nil, "", &ConfigError{"consumer_management.mode", fmt.Sprintf("must be one of bind_only, create_if_missing, reconcile (got %q)", spec.Mode)}
	}

	// A create right after the consumer was deleted can meet the deletion
	// still in progress: the server answers "consumer does not exist" or
	// "error creating store for consumer" to the create (both seen against
	// nats-server 2.15 on a loaded machine, after an operator deleted a
	// running consumer). Start over, briefly.
	for attempt := 1; ; attempt++ {
		c, action, err := ensureDurable(ctx, js, spec, desired)
		if !deletionInProgress(err) || attempt == deletionRetries {
			return c, action, err
		}
		select {
		case <-ctx.Done():
			return nil, "", err
		case <-time.After(deletionRetryWait):
		}
	}
}

// deletionInProgress reports whether a refused create may be a deletion of
// the same consumer still finishing on the server. The store error (10012)
// is the server's generic create failure; a persistent one is returned
// after the short wait like any other.
func deletionInProgress(err error) bool {
	if errors.Is(err, jetstream.ErrConsumerDoesNotExist) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeConsumerCreate
}

// deletionRetries and deletionRetryWait bound how long EnsureConsumer waits
// for a deletion in progress on the server to finish: about two seconds.
const (
	deletionRetries   = 10
	deletionRetryWait = 200 * time.Millisecond
)

// ensureDurable looks the durable consumer up and binds, reconciles or
// creates it.
func ensureDurable(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, desired jetstream.ConsumerConfig) (jetstream.Consumer, string, error) {
	c, err := js.Consumer(ctx, spec.Stream, spec.Name)
	switch {
	case err == nil:
		return present(ctx, js, spec, c)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, "", streamMissing(spec.Stream)
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, "", fmt.Errorf("look up consumer %q on stream %q: %w", spec.Name, spec.Stream, err)
	case spec.Mode == ModeBindOnly:
		return nil, "", &ConfigError{"consumer_management", fmt.Sprintf("JetStream durable consumer %q does not exist in stream %q", spec.Name, spec.Stream)}
	}

	c, err = js.CreateConsumer(ctx, spec.Stream, desired)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another process created it between our lookup and our create
		// (with a different configuration, or the create would have
		// succeeded): treat it as present.
		c, err = js.Consumer(ctx, spec.Stream, spec.Name)
		if err != nil {
			return nil, "", fmt.Errorf("look up consumer %q on stream %q: %w", spec.Name, spec.Stream, err)
		}
		return present(ctx, js, spec, c)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, "", streamMissing(spec.Stream)
	}
	if errors.Is(err, jetstream.ErrConsumerMultipleFilterSubjectsNotSupported) {
		// nats.go saw that the server dropped the filters, after the
		// server had created the consumer without them.
		return nil, "", createdOtherwise(ctx, js, spec, []driftItem{{field: "filter_subjects", expected: fmtSet(spec.filters()), actual: "[]"}})
	}
	if err != nil {
		return nil, "", fmt.Errorf("create consumer %q on stream %q: %w", spec.Name, spec.Stream, err)
	}
	if err := verifyCreated(ctx, js, spec, c); err != nil {
		return nil, "", err
	}
	return c, ActionCreated, nil
}

// verifyCreated checks the configuration the server answered a create with
// against spec. The version check in checkServer trusts the server the
// client is connected to; behind a leaf node or a domain the consumer lives
// on another server, which may be older and then silently drops fields it
// does not know. A consumer that differs is deleted again (this start
// created it, and the next start would only refuse it as drift) and the
// difference is a *ConfigError.
func verifyCreated(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, c jetstream.Consumer) error {
	info := c.CachedInfo()
	if info == nil {
		return nil
	}
	if items := drift(spec, info.Config); len(items) > 0 {
		return createdOtherwise(ctx, js, spec, items)
	}
	return nil
}

// createdOtherwise deletes the durable consumer the server created with
// the differences items and returns the *ConfigError naming them.
func createdOtherwise(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, items []driftItem) error {
	parts := make([]string, len(items))
	for i, d := range items {
		parts[i] = fmt.Sprintf("%s expected=%s actual=%s", d.field, d.expected, d.actual)
	}
	what, fate := fmt.Sprintf("durable consumer %q", spec.Name), "it was deleted again"
	if spec.Ephemeral {
		what, fate = "an ephemeral consumer", "it expires on its own"
	} else if err := js.DeleteConsumer(ctx, spec.Stream, spec.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		fate = fmt.Sprintf("deleting it failed (%v); delete it by hand", err)
	}
	return &ConfigError{"consumer_management", fmt.Sprintf("the server created %s on stream %q with settings other than configured (%s); %s",
		what, spec.Stream, strings.Join(parts, "; "), fate)}
}

// present handles a consumer that exists: a drift check, and in reconcile
// mode an update of the mutable differences.
func present(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, c jetstream.Consumer) (jetstream.Consumer, string, error) {
	info := c.CachedInfo()
	if info == nil {
		return nil, "", fmt.Errorf("consumer %q on stream %q: no consumer info", spec.Name, spec.Stream)
	}
	items := drift(spec, info.Config)
	if len(items) == 0 {
		return c, ActionBound, nil
	}
	if spec.Mode != ModeReconcile {
		return nil, "", driftError(spec, items)
	}
	var immutable []driftItem
	for _, d := range items {
		if d.immutable {
			immutable = append(immutable, d)
		}
	}
	if len(immutable) > 0 {
		// Only these block the start: the mutable ones would be updated.
		return nil, "", driftError(spec, immutable)
	}
	c, err := js.UpdateConsumer(ctx, spec.Stream, reconciled(spec, info.Config))
	if errors.Is(err, jetstream.ErrConsumerMultipleFilterSubjectsNotSupported) {
		// The server (older than the one the client is connected to, or
		// checkServer would have refused) applied the update without the
		// filters: put the previous configuration back.
		msg := "restored its previous configuration"
		if _, rerr := js.UpdateConsumer(ctx, spec.Stream, info.Config); rerr != nil {
			msg = fmt.Sprintf("restoring its previous configuration failed (%v)", rerr)
		}
		return nil, "", &ConfigError{"consumer_management.filter_subjects", fmt.Sprintf(
			"the server updated durable consumer %q on stream %q without the filter subjects (it does not support several); %s",
			spec.Name, spec.Stream, msg)}
	}
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			// The server understood and refused the change (for example
			// more replicas than a single server can hold): the
			// configuration must change, not the network.
			return nil, "", &ConfigError{"consumer_management", fmt.Sprintf("reconcile of durable consumer %q on stream %q was refused by the server: %v",
				spec.Name, spec.Stream, apiErr)}
		}
		return nil, "", fmt.Errorf("reconcile consumer %q on stream %q: %w", spec.Name, spec.Stream, err)
	}
	// Re-read: the server may normalise what it was sent, and only its
	// answer says the drift is gone.
	info, err = c.Info(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("read consumer %q on stream %q after reconcile: %w", spec.Name, spec.Stream, err)
	}
	if items := drift(spec, info.Config); len(items) > 0 {
		return nil, "", driftError(spec, items)
	}
	return c, ActionReconciled, nil
}

// reconciled returns the server's configuration cur with the configured
// fields of docs/delivery.md#consumer-management overwritten. Immutable fields are not touched:
// present only gets here when they already match.
func reconciled(spec ConsumerSpec, cur jetstream.ConsumerConfig) jetstream.ConsumerConfig {
	c := cur
	c.FilterSubject, c.FilterSubjects = "", nil
	if f := spec.filters(); len(f) == 1 {
		c.FilterSubject = f[0]
	} else {
		c.FilterSubjects = slices.Clone(f)
	}
	if spec.AckWait != nil {
		c.AckWait = *spec.AckWait
	}
	if spec.MaxDeliver != nil {
		c.MaxDeliver = *spec.MaxDeliver
	}
	if spec.BackOff != nil {
		c.BackOff = slices.Clone(spec.BackOff)
	}
	if spec.MaxAckPending != nil {
		c.MaxAckPending = *spec.MaxAckPending
	}
	if spec.HeadersOnly != nil {
		c.HeadersOnly = *spec.HeadersOnly
	}
	if spec.Replicas != nil {
		c.Replicas = *spec.Replicas
	}
	if len(spec.Metadata) > 0 {
		// Merge: keys the operator did not configure (the server's _nats.*
		// keys, another tool's annotations) stay.
		md := make(map[string]string, len(cur.Metadata)+len(spec.Metadata))
		for k, v := range cur.Metadata {
			md[k] = v
		}
		for k, v := range spec.Metadata {
			md[k] = v
		}
		c.Metadata = md
	}
	return c
}

// streamMissing is a configuration error: consumer management is start-up
// step 8, whose failures exit 2 (docs/delivery.md#start-up).
func streamMissing(stream string) error {
	return &ConfigError{"nats.stream", fmt.Sprintf("JetStream stream %q does not exist", stream)}
}

// driftItem is one differing field of docs/delivery.md#consumer-management.
type driftItem struct {
	field, expected, actual string
	immutable               bool // reconcile mode updates mutable fields only
}

// driftError returns the *ConfigError of docs/delivery.md#consumer-management listing items.
func driftError(spec ConsumerSpec, items []driftItem) error {
	parts := make([]string, len(items))
	for i, d := range items {
		parts[i] = fmt.Sprintf("%s expected=%s actual=%s", d.field, d.expected, d.actual)
	}
	return &ConfigError{"consumer_management", fmt.Sprintf("durable consumer %q on stream %q has incompatible settings: %s",
		spec.Name, spec.Stream, strings.Join(parts, "; "))}
}

func drift(spec ConsumerSpec, got jetstream.ConsumerConfig) []driftItem {
	var out []driftItem
	add := func(field, want, have string, immutable bool) {
		if want != have {
			out = append(out, driftItem{field, want, have, immutable})
		}
	}
	if !spec.Ephemeral && got.Name != spec.Name && got.Durable != spec.Name {
		add("durable_name", spec.Name, cmpOr(got.Durable, got.Name), true)
	}
	add("deliver_subject", "", got.DeliverSubject, true)
	add("filter_subjects", fmtSet(spec.filters()), fmtSet(serverFilters(got)), false)
	add("ack_policy", "explicit", ackPolicy(got.AckPolicy), true)
	dp, _ := deliverPolicy(spec.DeliverPolicy)
	add("deliver_policy", dp.String(), got.DeliverPolicy.String(), true)
	rp, _ := replayPolicy(spec.ReplayPolicy)
	add("replay_policy", rp.String(), got.ReplayPolicy.String(), true)
	if spec.HeadersOnly != nil {
		add("headers_only", strconv.FormatBool(*spec.HeadersOnly), strconv.FormatBool(got.HeadersOnly), false)
	}
	if spec.AckWait != nil && !closeSeconds(*spec.AckWait, got.AckWait) {
		out = append(out, driftItem{"ack_wait", fmtSeconds(*spec.AckWait), fmtSeconds(got.AckWait), false})
	}
	if spec.BackOff != nil && !sameBackOff(spec.BackOff, got.BackOff) {
		out = append(out, driftItem{"backoff", fmtDurations(spec.BackOff), fmtDurations(got.BackOff), false})
	}
	if spec.MaxDeliver != nil {
		add("max_deliver", strconv.Itoa(*spec.MaxDeliver), strconv.Itoa(got.MaxDeliver), false)
	}
	if spec.MaxAckPending != nil {
		add("max_ack_pending", strconv.Itoa(*spec.MaxAckPending), strconv.Itoa(got.MaxAckPending), false)
	}
	if spec.Replicas != nil {
		add("num_replicas", strconv.Itoa(*spec.Replicas), strconv.Itoa(got.Replicas), false)
	}
	if spec.MaxWaiting != nil {
		add("max_waiting", strconv.Itoa(*spec.MaxWaiting), strconv.Itoa(got.MaxWaiting), true)
	}
	if spec.MemoryStorage != nil {
		add("mem_storage", strconv.FormatBool(*spec.MemoryStorage), strconv.FormatBool(got.MemoryStorage), true)
	}
	// Only configured keys are compared; the server adds its own (_nats.*)
	// keys, which are no drift (docs/migrating.md Q10).
	keys := make([]string, 0, len(spec.Metadata))
	for k := range spec.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		have, ok := got.Metadata[k]
		if !ok {
			have = "<absent>"
		}
		add("metadata."+k, spec.Metadata[k], have, false)
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func serverFilters(c jetstream.ConsumerConfig) []string {
	if len(c.FilterSubjects) > 0 {
		return c.FilterSubjects
	}
	if c.FilterSubject != "" {
		return []string{c.FilterSubject}
	}
	return nil
}

// fmtSet renders a filter set order-insensitively.
func fmtSet(s []string) string {
	s = slices.Clone(s)
	slices.Sort(s)
	return "[" + strings.Join(s, ",") + "]"
}

func ackPolicy(p jetstream.AckPolicy) string {
	switch p {
	case jetstream.AckExplicitPolicy:
		return "explicit"
	case jetstream.AckAllPolicy:
		return "all"
	case jetstream.AckNonePolicy:
		return "none"
	}
	return p.String()
}

// closeSeconds compares durations with the ±0.001 s tolerance of docs/delivery.md#consumer-management.
func closeSeconds(a, b time.Duration) bool {
	return math.Abs((a - b).Seconds()) <= 0.001
}

func sameBackOff(a, b []time.Duration) bool {
	return slices.EqualFunc(a, b, closeSeconds)
}

func fmtSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

func fmtDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmtSeconds(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// CheckBatchSize checks delivery.batch_size against the consumer's
// max_batch (MaxRequestBatch) when the server reports one (docs/delivery.md#start-up step 9).
func CheckBatchSize(info *jetstream.ConsumerInfo, batchSize int) error {
	if info == nil || info.Config.MaxRequestBatch <= 0 || batchSize <= info.Config.MaxRequestBatch {
		return nil
	}
	return &ConfigError{"delivery.batch_size", fmt.Sprintf("exceeds the consumer's max_batch %d", info.Config.MaxRequestBatch)}
}

// CheckMaxBatchBytes checks delivery.max_batch_bytes against the server's
// max_payload (from INFO, nats.Conn.MaxPayload): a fetch must be able to
// hold at least one message of the largest size the server accepts.
func CheckMaxBatchBytes(maxPayload int64, maxBatchBytes int) error {
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxBatchBytes
	}
	if maxPayload <= int64(maxBatchBytes) {
		return nil
	}
	return &ConfigError{"delivery.max_batch_bytes", fmt.Sprintf("must be at least the server's max_payload %d", maxPayload)}
}

// CheckDLQ checks that a JetStream stream captures the DLQ subject (runtime
// docs/delivery.md#start-up step 7) and returns its name. No such stream is a *ConfigError; any
// other error (for example the lookup is not permitted) is returned as is,
// and the caller only warns.
func CheckDLQ(ctx context.Context, js jetstream.JetStream, subject string) (string, error) {
	name, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", &ConfigError{"dead_letter.subject", fmt.Sprintf("no JetStream stream captures %q", subject)}
	}
	if err != nil {
		return "", fmt.Errorf("look up the stream capturing %q: %w", subject, err)
	}
	return name, nil
}

// DLQWindowWarning returns the warning of docs/delivery.md#dead-letter-queue when the DLQ stream's
// duplicate window is shorter than the consumer's AckWait or its largest
// BackOff step (a redelivery after a lost ACK would then add a second DLQ
// entry), or "" when the window is long enough or cannot be read.
func DLQWindowWarning(ctx context.Context, js jetstream.JetStream, dlqStream string, consumer *jetstream.ConsumerInfo) string {
	if consumer == nil {
		return ""
	}
	st, err := js.Stream(ctx, dlqStream)
	if err != nil {
		return ""
	}
	window := st.CachedInfo().Config.Duplicates
	longest := consumer.Config.AckWait
	for _, b := range consumer.Config.BackOff {
		longest = max(longest, b)
	}
	if window <= 0 || window >= longest {
		return ""
	}
	return fmt.Sprintf("dead_letter.subject: stream %q duplicate window %v is shorter than the consumer's redelivery interval %v; a message redelivered after a lost ACK may be dead-lettered twice",
		dlqStream, window, longest)
}
