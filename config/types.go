package config

import (
	"github.com/nats-sinks/nats-sink/natsconfig"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is one loaded, validated configuration file (docs/configuration.md).
// Units are the file's units (seconds, milliseconds); callers convert.
// Nullable keys are pointers: nil is the spec's null.
type Config struct {
	NATS               NATS               `json:"nats" required:"true" doc:"NATS connection and the JetStream stream/consumer to read (docs/configuration.md#nats)."`
	ConsumerManagement ConsumerManagement `json:"consumer_management" doc:"How the durable consumer is created or verified (docs/configuration.md#consumer_management)."`
	Delivery           Delivery           `json:"delivery" doc:"Batching, retries, acknowledgement (docs/configuration.md#delivery)."`
	DeadLetter         DeadLetter         `json:"dead_letter" doc:"Dead-letter publishing (docs/configuration.md#dead_letter)."`
	Logging            Logging            `json:"logging" doc:"Logging (docs/configuration.md#logging)."`
	Metrics            Metrics            `json:"metrics" doc:"Metrics (docs/configuration.md#metrics)."`
	MessageMetadata    MessageMetadata    `json:"message_metadata" doc:"Priority, classification and labels (docs/configuration.md#message_metadata)."`
	Encryption         Encryption         `json:"encryption" doc:"Payload encryption (docs/configuration.md#encryption)."`
	Tracing            Tracing            `json:"tracing" doc:"OpenTelemetry tracing (docs/configuration.md#tracing)."`
	// MessageAuthenticity verifies producer signatures; Custody attaches
	// custody hashes to stored records (docs/integrity.md).
	MessageAuthenticity MessageAuthenticity `json:"message_authenticity" doc:"Producer signature verification (docs/integrity.md)."`
	Custody             Custody             `json:"custody" doc:"Chain-of-custody hashes on stored records (docs/integrity.md)."`
	// Sink is the destination. Its object is decoded by the registered
	// sink Decoder, not by this package.
	Sink SinkConfig `json:"sink" required:"true" fields:"external"`
	// Sinks are the named sinks by name (docs/routing.md). An active
	// fanout sink writes to those its routes use; with any other active
	// sink they are validated only.
	Sinks map[string]*NamedSink `json:"sinks" fields:"external"`
	// namedOrder is the names of Sinks in the order the file wrote them
	// (test-sink --all-named-sinks lists them so); nil for a Go-built
	// configuration.
	namedOrder []string
	// Routing is the route policy of a fanout sink.
	Routing Routing `json:"routing" fields:"external"`

	// Warnings lists load warnings as "<path>: <text>" (docs/configuration.md#metrics, docs/configuration.md#upstream-sections-that-nats-sink-does-not-provide);
	// the CLI prints each as "Warning: <path>: <text>".
	Warnings []string `json:"-"`

	// sinkTree is the sink object after overrides, for Effective when the
	// Opener is not a fields-tagged struct.
	sinkTree map[string]any
}

// SinkConfig is the decoded sink section.
type SinkConfig struct {
	// Type is sink.type, trimmed and lower-cased.
	Type string
	// Opener is what the type's Decoder returned.
	Opener sink.Opener
}

// NATS is the nats section (docs/configuration.md#nats): the connection settings shared
// with the NATS republish sink, and the stream, consumer and subject to
// read. The embedded keys decode inline; the after tags keep the order of
// the section's table (url, urls, stream, consumer, subject, durable, name,
// …) for problem messages.
type NATS struct {
	natsconfig.Connection
	Stream   string `json:"stream" after:"urls" required:"true" nonblank:"true" doc:"Stream name: no whitespace, '.', '*', '>', '/', '\\'."`
	Consumer string `json:"consumer" after:"stream" required:"true" nonblank:"true" doc:"Durable consumer name; same rules as stream."`
	Subject  string `json:"subject" after:"consumer" required:"true" nonblank:"true" doc:"Subject pattern; the default consumer filter."`
	Durable  bool   `json:"durable" after:"subject" doc:"false: ephemeral consumer, consumer management skipped."`
}

// ConsumerManagement is the consumer_management section (docs/configuration.md#consumer_management).
type ConsumerManagement struct {
	Mode           string            `json:"mode" enum:"bind_only,create_if_missing,reconcile" doc:"docs/delivery.md#consumer-management."`
	FilterSubjects []string          `json:"filter_subjects" null:"empty" maxitems:"64" doc:"Each a valid pattern contained in nats.subject, no duplicates; empty = [nats.subject]."`
	DeliverPolicy  string            `json:"deliver_policy" enum:"all,last,new,last_per_subject"`
	ReplayPolicy   string            `json:"replay_policy" enum:"instant,original"`
	AckWaitSeconds *float64          `json:"ack_wait_seconds" xmin:"0" max:"86400" doc:"Not together with backoff_seconds."`
	MaxDeliver     *int              `json:"max_deliver" min:"1" max:"1000000"`
	BackoffSeconds *[]float64        `json:"backoff_seconds" strict:"true" minitems:"1" maxitems:"128" xmin:"0" max:"604800" doc:"Real JSON numbers only; requires max_deliver; at most max_deliver entries; not together with ack_wait_seconds."`
	MaxAckPending  *int              `json:"max_ack_pending" min:"1" max:"1000000"`
	MaxWaiting     *int              `json:"max_waiting" min:"1" max:"1000000"`
	HeadersOnly    *bool             `json:"headers_only" doc:"Request/verify headers-only delivery."`
	NumReplicas    *int              `json:"num_replicas" min:"0" max:"5"`
	MemoryStorage  *bool             `json:"memory_storage" doc:"Consumer state in memory."`
	Metadata       map[string]string `json:"metadata" null:"empty" maxitems:"32" maxlen:"512" nopad:"true" nocontrol:"true" doc:"Keys match ^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$ and must not look secret-bearing."`
}

// Delivery is the delivery section (docs/configuration.md#delivery).
type Delivery struct {
	BatchSize                 int             `json:"batch_size" min:"1" max:"10000" doc:"Upper bound of one fetch."`
	BatchTimeoutMS            int             `json:"batch_timeout_ms" min:"1" doc:"Fetch expiry."`
	MaxBatchBytes             int             `json:"max_batch_bytes" min:"1048576" max:"60000000" doc:"Bytes one fetch may return (JetStream pull max_bytes); at start it must be at least the server's max_payload."`
	MaxInFlightBatches        int             `json:"max_in_flight_batches" min:"1" max:"64" doc:"Concurrent batches (docs/delivery.md#ordering)."`
	AckPolicy                 string          `json:"ack_policy" enum:"after_sink_commit"`
	MaxRetries                int             `json:"max_retries" min:"0" max:"1000000" doc:"Active NAK budget (docs/delivery.md#retries-and-back-off)."`
	RetryBackoffMS            int             `json:"retry_backoff_ms" min:"0" max:"3600000"`
	RetryBackoffMaxMS         int             `json:"retry_backoff_max_ms" min:"0" max:"3600000" doc:"Must be at least retry_backoff_ms."`
	RetryBackoffMode          string          `json:"retry_backoff_mode" enum:"fixed,linear,exponential"`
	RetryBackoffMultiplier    float64         `json:"retry_backoff_multiplier" min:"1.0" max:"10.0"`
	RetryJitter               string          `json:"retry_jitter" enum:"none,full,equal"`
	TemporaryFailureAction    string          `json:"temporary_failure_action" enum:"nak,leave_unacked"`
	PreferSafeDuplication     bool            `json:"prefer_safe_duplication" doc:"false is rejected: the runtime always prefers redelivery over loss."`
	PriorityLanes             PriorityLanes   `json:"priority_lanes"`
	InProgress                InProgress      `json:"in_progress"`
	AckConfirmation           AckConfirmation `json:"ack_confirmation"`
	PermanentFailureIsolation string          `json:"permanent_failure_isolation" enum:"message,batch"`
	FailFast                  bool            `json:"fail_fast" doc:"Stop with exit 1 on ACK, TERM, DLQ-publish or destination failures."`
	ShutdownTimeoutMS         int             `json:"shutdown_timeout_ms" min:"0" max:"600000" doc:"Drain bound for in-flight batches (docs/delivery.md#shutdown)."`
}

// PriorityLanes is delivery.priority_lanes (docs/configuration.md#delivery).
type PriorityLanes struct {
	Enabled                bool   `json:"enabled"`
	DefaultLane            string `json:"default_lane" trim:"true" lower:"true" pattern:"^[a-z][a-z0-9_-]{0,63}$" doc:"Must name a lane."`
	UnknownPriorityAction  string `json:"unknown_priority_action" enum:"default_lane,reject"`
	MaxPriorityValueLength int    `json:"max_priority_value_length" min:"1" max:"256"`
	Lanes                  []Lane `json:"lanes" minitems:"1" doc:"Lane names unique; each priority value in at most one lane."`
}

// Lane is one item of delivery.priority_lanes.lanes.
type Lane struct {
	Name       string   `json:"name" required:"true" trim:"true" lower:"true" pattern:"^[a-z][a-z0-9_-]{0,63}$"`
	Priorities []string `json:"priorities" null:"empty" orstring:"one" trim:"true" lower:"true" nonblank:"true" nocontrol:"true" doc:"Trimmed, case-folded, at most max_priority_value_length characters."`
	Weight     int      `json:"weight" min:"1" max:"100"`
}

// SetDefaults sets a lane's defaults before its object is decoded.
func (l *Lane) SetDefaults() { *l = Lane{Priorities: []string{}, Weight: 1} }

// InProgress is delivery.in_progress (docs/configuration.md#delivery).
type InProgress struct {
	Enabled           bool `json:"enabled" doc:"Requires nats.durable, no backoff_seconds, ack_wait_seconds unless bind_only; interval_ms < 80% of AckWait."`
	IntervalMS        int  `json:"interval_ms" min:"1" max:"3600000"`
	MaxHeartbeats     int  `json:"max_heartbeats" min:"1" max:"10000"`
	ShutdownTimeoutMS int  `json:"shutdown_timeout_ms" min:"0" max:"60000"`
}

// AckConfirmation is delivery.ack_confirmation (docs/configuration.md#delivery).
type AckConfirmation struct {
	Enabled           bool   `json:"enabled" doc:"ACKs wait for the server's confirmation."`
	TimeoutMS         int    `json:"timeout_ms" min:"1" max:"60000"`
	UnsupportedAction string `json:"unsupported_action" enum:"fail,standard_ack"`
}

// DeadLetter is the dead_letter section (docs/configuration.md#dead_letter).
type DeadLetter struct {
	Enabled             bool    `json:"enabled"`
	Subject             *string `json:"subject" doc:"Required when enabled; a literal subject not consumed by nats.subject or filter_subjects."`
	IncludePayload      bool    `json:"include_payload"`
	IncludeHeaders      bool    `json:"include_headers"`
	IncludeError        bool    `json:"include_error"`
	AckTermAfterPublish bool    `json:"ack_term_after_publish" doc:"TERM instead of ACK after a DLQ publish."`
	PublishTimeoutMS    int     `json:"publish_timeout_ms" min:"100" max:"60000"`
	OnMaxDeliver        bool    `json:"on_max_deliver" doc:"Dead-letter a temporary failure on the last allowed delivery."`
}

// Logging is the logging section (docs/configuration.md#logging).
type Logging struct {
	Level          string `json:"level" trim:"true" upper:"true" enum:"DEBUG,INFO,WARNING,ERROR,CRITICAL"`
	PayloadLogging bool   `json:"payload_logging" doc:"true is rejected: payloads are never logged."`
	Format         string `json:"format" enum:"json,text"`
}

// Metrics is the metrics section (docs/configuration.md#metrics).
type Metrics struct {
	Enabled                         bool     `json:"enabled"`
	Namespace                       string   `json:"namespace" trim:"true" pattern:"^[A-Za-z_:][A-Za-z0-9_:]*$"`
	SnapshotFile                    *string  `json:"snapshot_file" nonblank:"true" nocontrol:"crlf" doc:"JSON snapshot path; written only when enabled."`
	EventFreshnessEnabled           bool     `json:"event_freshness_enabled"`
	EventStaleAfterSeconds          *float64 `json:"event_stale_after_seconds" min:"0" max:"31536000" doc:"null disables stale counters."`
	EventFutureSkewToleranceSeconds float64  `json:"event_future_skew_tolerance_seconds" min:"0" max:"86400"`
	Listen                          *string  `json:"listen" doc:"host:port of the HTTP endpoint ([v6]:port allowed, empty host = all interfaces)."`
}

// MessageMetadata is the message_metadata section (docs/configuration.md#message_metadata).
type MessageMetadata struct {
	Priority       HeaderDefault  `json:"priority"`
	Classification HeaderDefault  `json:"classification"`
	Labels         LabelsConfig   `json:"labels"`
	Rules          []MetadataRule `json:"rules" doc:"First matching subject wins per field; explicit null counts."`
}

// HeaderDefault is message_metadata.priority and .classification.
type HeaderDefault struct {
	Header  string  `json:"header" trim:"true" nonblank:"true" nocontrol:"true"`
	Default *string `json:"default" trim:"true" blanknull:"true" nocontrol:"true" doc:"Blank means null."`
}

// LabelsConfig is message_metadata.labels.
type LabelsConfig struct {
	Header  string   `json:"header" trim:"true" nonblank:"true" nocontrol:"true"`
	Default []string `json:"default" null:"empty" orstring:";" doc:"Normalised per docs/configuration.md#priority-classification-and-labels; array items must not contain ';'."`
}

// MetadataRule is one item of message_metadata.rules. The Has fields record
// whether the key was present (an explicit null counts, docs/formats.md#metadata-document).
type MetadataRule struct {
	Subject           string   `json:"subject" required:"true" nonblank:"true"`
	Priority          *string  `json:"priority" trim:"true" blanknull:"true" nocontrol:"true"`
	Classification    *string  `json:"classification" trim:"true" blanknull:"true" nocontrol:"true"`
	Labels            []string `json:"labels" null:"empty" orstring:";"`
	HasPriority       bool     `json:"-" presence:"priority"`
	HasClassification bool     `json:"-" presence:"classification"`
	HasLabels         bool     `json:"-" presence:"labels"`
}

// Encryption is the encryption section (docs/configuration.md#encryption).
type Encryption struct {
	Enabled        bool          `json:"enabled" doc:"Encrypt subjects that match no rule."`
	Algorithm      string        `json:"algorithm" trim:"true" lower:"true" replace:"_=-" enum:"aes-256-gcm,aes-256-ccm"`
	KeyID          string        `json:"key_id" nonblank:"true" maxlen:"128" doc:"Stored in every envelope."`
	KeyB64         *secret.Value `json:"key_b64" secret:"true" doc:"Standard padded base64 of exactly 32 bytes; only one of key_b64, key_b64_env, key_b64_file."`
	KeyB64Env      *string       `json:"key_b64_env" nonblank:"true" doc:"Environment variable holding the base64 key; read when the runner starts."`
	KeyB64File     *string       `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the base64 key."`
	NonceSizeBytes int           `json:"nonce_size_bytes" min:"7" max:"13" doc:"aes-256-gcm requires 8..13. Accepted but warned about: other than 12 with aes-256-gcm, under 12 with aes-256-ccm."`
	TagLength      int           `json:"tag_length" enum:"4,6,8,10,12,14,16" doc:"CCM only; GCM always uses 16. Under 16 is accepted but warned about."`
	// EnvelopeVersion is 1 (upstream's envelope) or 2 (no plaintext
	// digest in the clear, associated data binding the message).
	EnvelopeVersion int              `json:"envelope_version" enum:"1,2" doc:"1: upstream-compatible envelope with a clear plaintext SHA-256 (warned about); 2: keyed MAC and associated data binding key id, algorithm, schema, stream, subject and stream sequence."`
	Rules           []EncryptionRule `json:"rules" doc:"Ordered; first matching subject wins; omitted values inherit the top level."`
}

// EncryptionRule is one item of encryption.rules. Nil pointers inherit the
// top-level value, except that a rule with its own key source never
// inherits the other key field.
type EncryptionRule struct {
	Subject         string        `json:"subject" required:"true" nonblank:"true"`
	Enabled         bool          `json:"enabled" doc:"false = exemption."`
	Algorithm       *string       `json:"algorithm" null:"reject" trim:"true" lower:"true" replace:"_=-" enum:"aes-256-gcm,aes-256-ccm"`
	KeyID           *string       `json:"key_id" null:"reject" nonblank:"true" maxlen:"128"`
	KeyB64          *secret.Value `json:"key_b64" secret:"true"`
	KeyB64Env       *string       `json:"key_b64_env" nonblank:"true"`
	KeyB64File      *string       `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true"`
	NonceSizeBytes  *int          `json:"nonce_size_bytes" null:"reject" min:"7" max:"13"`
	TagLength       *int          `json:"tag_length" null:"reject" enum:"4,6,8,10,12,14,16"`
	EnvelopeVersion *int          `json:"envelope_version" null:"reject" enum:"1,2"`
}

// SetDefaults sets a rule's defaults before its object is decoded.
func (r *EncryptionRule) SetDefaults() { *r = EncryptionRule{Enabled: true} }

// HasKey reports whether the rule names its own key source.
func (r *EncryptionRule) HasKey() bool {
	return r.KeyB64 != nil || r.KeyB64Env != nil || r.KeyB64File != nil
}

// HasKey reports whether the top level names a key source.
func (e *Encryption) HasKey() bool {
	return e.KeyB64 != nil || e.KeyB64Env != nil || e.KeyB64File != nil
}

// Tracing is the tracing section (docs/configuration.md#tracing).
type Tracing struct {
	Enabled     bool              `json:"enabled"`
	Exporter    string            `json:"exporter" enum:"otlp-http,otlp-grpc,stdout"`
	Endpoint    *string           `json:"endpoint" trim:"true" doc:"http(s)://host[:port][/path]; null = OTEL_EXPORTER_OTLP_* variables or the exporter default. Not with stdout."`
	SampleRatio float64           `json:"sample_ratio" min:"0.0" max:"1.0" doc:"Parent-based sampler ratio for root spans."`
	ServiceName string            `json:"service_name" nonblank:"true" maxlen:"128"`
	HeadersEnv  map[string]string `json:"headers_env" null:"empty" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Exporter request headers whose values come from environment variables."`
}

// Default returns a configuration holding every default of docs/configuration.md. The
// required keys (nats.stream, nats.consumer, nats.subject, sink) are empty.
func Default() Config {
	return Config{
		NATS: NATS{
			Connection: natsconfig.Default(),
			Durable:    true,
		},
		ConsumerManagement: ConsumerManagement{
			Mode:           "create_if_missing",
			FilterSubjects: []string{},
			DeliverPolicy:  "all",
			ReplayPolicy:   "instant",
			Metadata:       map[string]string{},
		},
		Delivery: Delivery{
			BatchSize:              100,
			BatchTimeoutMS:         1000,
			MaxBatchBytes:          16777216,
			MaxInFlightBatches:     1,
			AckPolicy:              "after_sink_commit",
			MaxRetries:             5,
			RetryBackoffMS:         1000,
			RetryBackoffMaxMS:      60000,
			RetryBackoffMode:       "exponential",
			RetryBackoffMultiplier: 2.0,
			RetryJitter:            "full",
			TemporaryFailureAction: "nak",
			PreferSafeDuplication:  true,
			PriorityLanes: PriorityLanes{
				DefaultLane:            "default",
				UnknownPriorityAction:  "default_lane",
				MaxPriorityValueLength: 64,
				Lanes:                  []Lane{{Name: "default", Priorities: []string{}, Weight: 1}},
			},
			InProgress:                InProgress{IntervalMS: 5000, MaxHeartbeats: 12, ShutdownTimeoutMS: 5000},
			AckConfirmation:           AckConfirmation{TimeoutMS: 1000, UnsupportedAction: "fail"},
			PermanentFailureIsolation: "message",
			ShutdownTimeoutMS:         20000,
		},
		DeadLetter: DeadLetter{
			IncludePayload:   true,
			IncludeHeaders:   true,
			IncludeError:     true,
			PublishTimeoutMS: 5000,
			OnMaxDeliver:     true,
		},
		Logging: Logging{Level: "INFO", Format: "json"},
		Metrics: Metrics{
			Namespace:                       "nats_sinks",
			EventFreshnessEnabled:           true,
			EventStaleAfterSeconds:          ptr(300.0),
			EventFutureSkewToleranceSeconds: 5,
		},
		MessageMetadata: MessageMetadata{
			Priority:       HeaderDefault{Header: "Nats-Sinks-Priority"},
			Classification: HeaderDefault{Header: "Nats-Sinks-Classification"},
			Labels:         LabelsConfig{Header: "Nats-Sinks-Labels", Default: []string{}},
			Rules:          []MetadataRule{},
		},
		Encryption: Encryption{
			Algorithm:       "aes-256-gcm",
			KeyID:           "default",
			NonceSizeBytes:  12,
			TagLength:       16,
			EnvelopeVersion: 1,
			Rules:           []EncryptionRule{},
		},
		MessageAuthenticity: defaultAuthenticity(),
		Custody:             defaultCustody(),
		Tracing: Tracing{
			Exporter:    "otlp-http",
			SampleRatio: 1.0,
			ServiceName: "nats-sink",
			HeadersEnv:  map[string]string{},
		},
	}
}

func ptr[T any](v T) *T { return &v }
