// Package sqlconfig holds the configuration keys every SQL sink (oracle,
// mysql, postgres, sqlite) shares (docs/sql.md): the default table,
// per-subject table routes, the payload mode, the column mapping of
// docs/formats.md#sql-tables and the idempotency key. A SQL sink's Config embeds
// Shared; the keys decode inline, in the sink object, after the sink's own.
//
// The package holds plain types and their defaults only. Each sink checks
// them with its database's identifier rules when it validates its Config,
// and compiles them into the statements it writes with.
package sqlconfig

// Idempotency strategies (docs/sql.md).
const (
	StrategyStreamSequence = "stream_sequence"
	StrategyMessageID      = "message_id"
	StrategyPayloadField   = "payload_field"
	// StrategyMapping keys a mapped row by mapping columns.
	StrategyMapping = "mapping"
)

// Layouts.
const (
	LayoutAudit  = "audit"
	LayoutMapped = "mapped"
)

// Columns maps the 16 fields of a row to column names (the "columns"
// object, docs/formats.md#sql-tables). Names are as configured; the database folds
// their case (PostgreSQL and SQLite lower, Oracle upper).
type Columns struct {
	StreamName                string `json:"stream_name" doc:"Column for the stream name."`
	StreamSequence            string `json:"stream_sequence" doc:"Column for the stream sequence."`
	Subject                   string `json:"subject" doc:"Column for the subject."`
	MessageID                 string `json:"message_id" doc:"Column for the message id (or the payload_field value)."`
	Priority                  string `json:"priority" doc:"Column for the priority."`
	Classification            string `json:"classification" doc:"Column for the classification."`
	Labels                    string `json:"labels" doc:"Column for the ;-joined labels."`
	MessageCreatedAtEpochNS   string `json:"message_created_at_epoch_ns" doc:"Column for the message creation time (epoch ns)."`
	JetStreamTimestampEpochNS string `json:"jetstream_timestamp_epoch_ns" doc:"Column for the JetStream timestamp (epoch ns)."`
	ReceivedAtEpochNS         string `json:"received_at_epoch_ns" doc:"Column for the receive time (epoch ns)."`
	StoredAtEpochNS           string `json:"stored_at_epoch_ns" doc:"Column for the store time (epoch ns)."`
	Payload                   string `json:"payload" doc:"JSON column for the normalised payload."`
	Headers                   string `json:"headers" doc:"JSON column for the headers."`
	Metadata                  string `json:"metadata" doc:"JSON column for the standard metadata document."`
	MissionMetadata           string `json:"mission_metadata" doc:"JSON column for mission metadata (always null)."`
	SecurityLabels            string `json:"security_labels" doc:"JSON column for security labels (always null)."`
}

// DefaultColumns returns the default mapping of docs/formats.md#sql-tables, before the
// database folds the names' case.
func DefaultColumns() Columns {
	return Columns{
		StreamName:                "STREAM_NAME",
		StreamSequence:            "STREAM_SEQUENCE",
		Subject:                   "SUBJECT",
		MessageID:                 "MESSAGE_ID",
		Priority:                  "PRIORITY",
		Classification:            "CLASSIFICATION",
		Labels:                    "LABELS",
		MessageCreatedAtEpochNS:   "MESSAGE_CREATED_AT_EPOCH_NS",
		JetStreamTimestampEpochNS: "JETSTREAM_TIMESTAMP_EPOCH_NS",
		ReceivedAtEpochNS:         "RECEIVED_AT_EPOCH_NS",
		StoredAtEpochNS:           "STORED_AT_EPOCH_NS",
		Payload:                   "PAYLOAD_JSON",
		Headers:                   "HEADERS_JSON",
		Metadata:                  "METADATA_JSON",
		MissionMetadata:           "MISSION_METADATA_JSON",
		SecurityLabels:            "SECURITY_LABELS_JSON",
	}
}

// Idempotency is the "idempotency" object (docs/sql.md).
type Idempotency struct {
	Strategy     string   `json:"strategy" enum:"stream_sequence,message_id,payload_field,mapping" doc:"What identifies a message: stream and sequence, message id, a payload field (written to the message_id column), or mapping columns (layout mapped)."`
	Columns      []string `json:"columns" doc:"Key columns (audit column names; with strategy mapping, mapping columns). Left at the default, strategies message_id and payload_field use [\"MESSAGE_ID\"]; strategy mapping needs its own list."`
	PayloadField *string  `json:"payload_field" doc:"Dotted path into the normalised payload; required for strategy payload_field."`
}

// DefaultKeyColumns returns the default idempotency columns.
func DefaultKeyColumns() []string { return []string{"STREAM_NAME", "STREAM_SEQUENCE"} }

// DefaultIdempotency returns the default idempotency object.
func DefaultIdempotency() Idempotency {
	return Idempotency{Strategy: StrategyStreamSequence, Columns: DefaultKeyColumns()}
}

// SetDefaults sets i to DefaultIdempotency(); the decoder calls it before
// decoding a route's idempotency object.
func (i *Idempotency) SetDefaults() { *i = DefaultIdempotency() }

// UpsertRoute is a table_routes item of the postgres, mysql and sqlite
// sinks: messages whose subject matches Subject go to Table.
type UpsertRoute struct {
	Subject             string         `json:"subject" required:"true" doc:"Subject pattern; the first matching route wins."`
	Table               string         `json:"table" required:"true" doc:"Table for matching messages."`
	Idempotency         *Idempotency   `json:"idempotency" doc:"Idempotency for this table; absent means the sink's idempotency."`
	UpsertUpdateColumns *[]string      `json:"upsert_update_columns" doc:"Update columns for this table; absent means the sink's, null all non-key mapped columns."`
	Mapping             *[]MappingItem `json:"mapping" doc:"Layout mapped: the mapping for this table; absent means the sink's, present replaces it whole."`
	IncludeColumns      *[]string      `json:"include_columns" unique:"true" doc:"Layout mapped: included audit columns for this table; absent means the sink's."`
	// UpdateColumnsSet tells an explicit null (all columns) from absence
	// (inherit the sink's value).
	UpdateColumnsSet bool `json:"-" presence:"upsert_update_columns"`
}

// MergeRoute is a table_routes item of the oracle sink.
type MergeRoute struct {
	Subject            string         `json:"subject" required:"true" doc:"Subject pattern; the first matching route wins."`
	Table              string         `json:"table" required:"true" doc:"Table for matching messages."`
	Idempotency        *Idempotency   `json:"idempotency" doc:"Idempotency for this table; absent means the sink's idempotency."`
	MergeUpdateColumns *[]string      `json:"merge_update_columns" doc:"Update columns for this table; absent means the sink's, null all non-key mapped columns."`
	Mapping            *[]MappingItem `json:"mapping" doc:"Layout mapped: the mapping for this table; absent means the sink's, present replaces it whole."`
	IncludeColumns     *[]string      `json:"include_columns" unique:"true" doc:"Layout mapped: included audit columns for this table; absent means the sink's."`
	// UpdateColumnsSet tells an explicit null from absence.
	UpdateColumnsSet bool `json:"-" presence:"merge_update_columns"`
}

// Route is the type set of table_routes items.
type Route interface{ UpsertRoute | MergeRoute }

// Shared holds the keys of docs/sql.md that every SQL sink declares the same
// way. A sink's Config embeds it (the keys decode inline) after its own
// keys and the three shared keys whose default, enum or name differ per
// database: mode, the update-columns key (upsert_update_columns, or
// merge_update_columns for oracle) and auto_create.
type Shared[R Route] struct {
	Table         string      `json:"table" doc:"Default table (name or schema.name)."`
	TableRoutes   []R         `json:"table_routes" doc:"Per-subject tables; the first route whose subject pattern matches wins, else table."`
	PayloadMode   string      `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised (docs/formats.md#payload-normalisation)."`
	PayloadColumn *string     `json:"payload_column" doc:"Legacy alias overriding columns.payload."`
	HeadersColumn *string     `json:"headers_column" doc:"Legacy alias overriding columns.headers."`
	Columns       Columns     `json:"columns" doc:"Field to column mapping (docs/formats.md#sql-tables)."`
	Idempotency   Idempotency `json:"idempotency" doc:"Key columns and how a message is identified."`
	// The mapped layout (docs/sql.md#mapped-layout).
	Layout         string        `json:"layout" enum:"audit,mapped" doc:"audit: one row per message in the audit layout; mapped: typed columns from mapping."`
	Mapping        []MappingItem `json:"mapping" doc:"Layout mapped: the mapped columns, in row order after the key and included columns."`
	IncludeColumns []string      `json:"include_columns" unique:"true" doc:"Layout mapped: audit columns (named as in columns) to keep in a mapped row."`
	LenientStrings bool          `json:"lenient_strings" doc:"Layout mapped: numeric, boolean and epoch inputs may also be JSON strings."`
	AutoEvolve     bool          `json:"auto_evolve" doc:"Layout mapped: add missing non-key columns (nullable) at start; never drops or retypes."`
	VersionColumn  *string       `json:"version_column" doc:"Layout mapped, upsert/merge: an update applies only when the row's value of this column is null or lower than the message's."`
	DeleteWhen     *DeleteWhen   `json:"delete_when" doc:"Layout mapped: which messages delete the row with their key."`
}

// DeleteWhen is the "delete_when" object: a message is a delete when the
// header equals the value, or (EmptyPayload) when its body is empty.
type DeleteWhen struct {
	Header       *string `json:"header" doc:"Header whose value marks a delete (with equals)."`
	Equals       *string `json:"equals" doc:"The header value that marks a delete."`
	EmptyPayload bool    `json:"empty_payload" doc:"A message with an empty body is a delete."`
}

// DefaultShared returns the shared keys with their defaults; table is the
// database's default table name ("nats_sink_events" or
// "NATS_SINK_EVENTS").
func DefaultShared[R Route](table string) Shared[R] {
	return Shared[R]{
		Table:          table,
		TableRoutes:    []R{},
		PayloadMode:    "json_or_envelope",
		Columns:        DefaultColumns(),
		Idempotency:    DefaultIdempotency(),
		Layout:         LayoutAudit,
		Mapping:        []MappingItem{},
		IncludeColumns: []string{},
	}
}

// MappingItem is one item of a "mapping" list (layout mapped, shared by the
// SQL sinks and clickhouse): where a column's value comes from and how it
// is converted. Default holds a JSON value as the configuration parser
// returns it (numbers keep the exact token), nil for none.
type MappingItem struct {
	Column    string `json:"column" required:"true" doc:"Column name (the database's identifier rule); distinct, ignoring case, from every other column of the row."`
	Path      string `json:"path" required:"true" nocontrol:"true" maxlen:"1024" doc:"JSON Pointer into the payload (\"\" = whole payload, \"/order/id\"), or one of $subject, $header:<Name>, $priority, $classification, $labels, $stream_sequence, $received_at."`
	Type      string `json:"type" required:"true" trim:"true" lower:"true" doc:"text, bigint, integer, double, numeric(p,s), boolean, timestamp, date, json, uuid or bytes."`
	Required  bool   `json:"required" doc:"A missing or null value dead-letters the message."`
	Default   any    `json:"default" doc:"Value for a missing (not null) input, converted at load like a payload value; not with required."`
	EpochUnit string `json:"epoch_unit" enum:"s,ms,us,ns" doc:"Unit of numeric input for timestamp and date."`
}

// SetDefaults sets the defaults of a mapping item (epoch_unit "ms"); the
// decoder calls it before decoding each item.
func (it *MappingItem) SetDefaults() { *it = MappingItem{EpochUnit: "ms"} }
