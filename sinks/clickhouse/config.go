// Package clickhouse is the ClickHouse sink: rows are sent over ClickHouse's
// HTTP interface as INSERT … FORMAT JSONEachRow requests, one per table (or
// per slice of max_rows_per_insert / max_request_bytes) and batch, in the
// audit layout of the SQL sinks or in a mapped layout of typed columns.
//
// The duplicate model is the table engine's: a ReplacingMergeTree ordered by
// the idempotency key keeps one row per key after merges, so a redelivered
// message only writes a row the engine later collapses. Readers use FINAL
// (or argMax) to see collapsed rows before a merge has run.
package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/urlcheck"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Config is the clickhouse sink's configuration. Default returns it with
// every default; Decode fills it from a "sink" object.
type Config struct {
	Type                   string                  `json:"type" trim:"true" lower:"true" enum:"clickhouse" doc:"Sink type."`
	URL                    string                  `json:"url" required:"true" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Base URL of the ClickHouse HTTP interface: http(s)://host[:port][/path], no credentials, query or fragment. http only to localhost, 127.0.0.1 or ::1 unless allow_plaintext_http."`
	EndpointAllowedHosts   []string                `json:"endpoint_allowed_hosts" unique:"true" lower:"true" nonblank:"true" nopad:"true" nocontrol:"true" doc:"When non-empty, the URL's host must be one of these (lower-case host names)."`
	AllowPlaintextHTTP     bool                    `json:"allow_plaintext_http" doc:"Allow http to any host (credentials and rows travel unencrypted; logged as a warning at start)."`
	Database               string                  `json:"database" pattern:"^[A-Za-z_][A-Za-z0-9_]{0,127}$" doc:"Database of the tables (case preserved)."`
	Table                  string                  `json:"table" pattern:"^[A-Za-z_][A-Za-z0-9_]{0,127}$" doc:"Default table (one name; the database is separate)."`
	TableRoutes            []Route                 `json:"table_routes" doc:"Per-subject tables; the first route whose subject pattern matches wins, else table."`
	User                   string                  `json:"user" nonblank:"true" nocontrol:"true" doc:"User name, sent with HTTP Basic authentication."`
	Password               *secret.Value           `json:"password" secret:"true" nocontrol:"true" doc:"Password (prefer password_env or password_file); none means an empty password."`
	PasswordEnv            *string                 `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password, read at start."`
	PasswordFile           *string                 `json:"password_file" nonblank:"true" doc:"File holding the password (one trailing newline removed), read at start."`
	TLS                    TLS                     `json:"tls" doc:"TLS settings for an https URL."`
	RequestTimeoutMS       int                     `json:"request_timeout_ms" min:"1000" max:"600000" doc:"Timeout of one request: upload, server-side insert and response."`
	MaxRowsPerInsert       *int                    `json:"max_rows_per_insert" min:"1" max:"10000" doc:"Most rows in one INSERT; null means one INSERT per table and batch."`
	MaxRequestBytes        int                     `json:"max_request_bytes" min:"65536" max:"1073741824" doc:"Largest uncompressed INSERT body; larger INSERTs are split, and a single larger row is dead-lettered."`
	Compression            string                  `json:"compression" enum:"none,gzip" doc:"Request body compression."`
	Layout                 string                  `json:"layout" enum:"audit,mapped" doc:"audit: one row per message in the audit layout; mapped: typed columns from mapping."`
	Columns                Columns                 `json:"columns" doc:"Audit field to column names."`
	Idempotency            Idempotency             `json:"idempotency" doc:"Key columns (the table's ORDER BY) and how a message is identified."`
	PayloadMode            string                  `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised."`
	Mapping                []sqlconfig.MappingItem `json:"mapping" doc:"Mapped columns (layout mapped), in row order after the key and included columns."`
	IncludeColumns         []string                `json:"include_columns" unique:"true" doc:"Audit columns (named as in columns) to keep in a mapped row."`
	LenientStrings         bool                    `json:"lenient_strings" doc:"Numeric, boolean and epoch inputs may also be JSON strings."`
	VersionColumn          *string                 `json:"version_column" doc:"ReplacingMergeTree version column of a mapped row; null means the stream-sequence column (added to the row when absent)."`
	AutoCreate             bool                    `json:"auto_create" doc:"Create each table (ReplacingMergeTree ordered by the key) at start when missing."`
	AutoEvolve             bool                    `json:"auto_evolve" doc:"Layout mapped: add missing non-key columns as Nullable at start."`
	RequireReplacingEngine bool                    `json:"require_replacing_engine" doc:"Check at start that each table is a *ReplacingMergeTree ordered by the key, partitioned by key columns only, with the configured version."`
	InsertQuorum           *int                    `json:"insert_quorum" min:"2" max:"16" doc:"Replicated tables: an INSERT succeeds only once this many replicas hold it."`
}

// Route is a table_routes item.
type Route struct {
	Subject        string                   `json:"subject" required:"true" doc:"Subject pattern; the first matching route wins."`
	Table          string                   `json:"table" required:"true" pattern:"^[A-Za-z_][A-Za-z0-9_]{0,127}$" doc:"Table for matching messages."`
	Idempotency    *Idempotency             `json:"idempotency" doc:"Idempotency for this table; absent means the sink's."`
	Mapping        *[]sqlconfig.MappingItem `json:"mapping" doc:"Mapping for this table; absent means the sink's, present replaces it whole."`
	IncludeColumns *[]string                `json:"include_columns" unique:"true" doc:"Included audit columns for this table; absent means the sink's."`
}

// Idempotency is the "idempotency" object.
type Idempotency struct {
	Strategy     string   `json:"strategy" enum:"stream_sequence,message_id,payload_field,mapping" doc:"What identifies a message: stream and sequence, message id, a payload field (written to the message_id column), or mapping columns (layout mapped)."`
	Columns      []string `json:"columns" doc:"Key columns (the table's ORDER BY). Left at the default, strategies message_id and payload_field use [\"message_id\"]; strategy mapping needs mapping columns."`
	PayloadField *string  `json:"payload_field" doc:"Dotted path into the normalised payload; required for strategy payload_field."`
}

// SetDefaults implements fields.Defaulter for route items.
func (i *Idempotency) SetDefaults() { *i = defaultIdempotency() }

func defaultKeyColumns() []string { return []string{"stream_name", "stream_sequence"} }

func defaultIdempotency() Idempotency {
	return Idempotency{Strategy: "stream_sequence", Columns: defaultKeyColumns()}
}

// TLS is the "tls" object.
type TLS struct {
	CAFile             *string `json:"ca_file" nonblank:"true" doc:"PEM file of the CAs to trust; null means the system pool."`
	CertFile           *string `json:"cert_file" nonblank:"true" doc:"PEM client certificate (with key_file)."`
	KeyFile            *string `json:"key_file" nonblank:"true" doc:"PEM client key (with cert_file)."`
	ServerName         *string `json:"server_name" nonblank:"true" doc:"Name to verify the server certificate against; null means the URL's host."`
	InsecureSkipVerify bool    `json:"insecure_skip_verify" doc:"Do not verify the server certificate (logged as a warning)."`
}

// Columns names the audit columns (the 16 fields of the SQL sinks' audit
// row), lower-case by default.
type Columns struct {
	StreamName                string `json:"stream_name" doc:"Column for the stream name."`
	StreamSequence            string `json:"stream_sequence" doc:"Column for the stream sequence (UInt64)."`
	Subject                   string `json:"subject" doc:"Column for the subject."`
	MessageID                 string `json:"message_id" doc:"Column for the message id (or the payload_field value)."`
	Priority                  string `json:"priority" doc:"Column for the priority."`
	Classification            string `json:"classification" doc:"Column for the classification."`
	Labels                    string `json:"labels" doc:"Column for the ;-joined labels."`
	MessageCreatedAtEpochNS   string `json:"message_created_at_epoch_ns" doc:"Column for the message creation time (epoch ns)."`
	JetStreamTimestampEpochNS string `json:"jetstream_timestamp_epoch_ns" doc:"Column for the JetStream timestamp (epoch ns)."`
	ReceivedAtEpochNS         string `json:"received_at_epoch_ns" doc:"Column for the receive time (epoch ns)."`
	StoredAtEpochNS           string `json:"stored_at_epoch_ns" doc:"Column for the store time (epoch ns)."`
	Payload                   string `json:"payload" doc:"Column for the normalised payload (JSON text)."`
	Headers                   string `json:"headers" doc:"Column for the headers (JSON text)."`
	Metadata                  string `json:"metadata" doc:"Column for the standard metadata document (JSON text)."`
	MissionMetadata           string `json:"mission_metadata" doc:"Column for mission metadata (always null)."`
	SecurityLabels            string `json:"security_labels" doc:"Column for security labels (always null)."`
}

// Default returns the configuration with every default.
func Default() Config {
	return Config{
		Type:                   "clickhouse",
		EndpointAllowedHosts:   []string{},
		Database:               "default",
		Table:                  "nats_sink_events",
		TableRoutes:            []Route{},
		User:                   "default",
		RequestTimeoutMS:       30000,
		MaxRequestBytes:        64 << 20,
		Compression:            "none",
		Layout:                 "audit",
		Columns:                defaultColumns(),
		Idempotency:            defaultIdempotency(),
		PayloadMode:            string(record.JSONOrEnvelope),
		Mapping:                []sqlconfig.MappingItem{},
		IncludeColumns:         []string{},
		RequireReplacingEngine: true,
	}
}

func defaultColumns() Columns {
	return Columns{
		StreamName: "stream_name", StreamSequence: "stream_sequence", Subject: "subject", MessageID: "message_id",
		Priority: "priority", Classification: "classification", Labels: "labels",
		MessageCreatedAtEpochNS: "message_created_at_epoch_ns", JetStreamTimestampEpochNS: "jetstream_timestamp_epoch_ns",
		ReceivedAtEpochNS: "received_at_epoch_ns", StoredAtEpochNS: "stored_at_epoch_ns",
		Payload: "payload_json", Headers: "headers_json", Metadata: "metadata_json",
		MissionMetadata: "mission_metadata_json", SecurityLabels: "security_labels_json",
	}
}

// rejectedKeys are keys of the SQL sinks that this sink does not take.
var rejectedKeys = []string{"mode", "upsert_update_columns", "payload_column", "headers_column", "staging", "delete_when"}

// Decode validates one clickhouse "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object. The object is parsed with exact numbers, so a mapping
// default keeps the value written. Secrets are read by Open.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	var p fields.Problems
	tree, err := jsonx.ParseExact(raw)
	if err != nil {
		if pe, ok := errors.AsType[*jsonx.PathError](err); ok {
			p.Add(pe.Path, pe.Message)
		} else {
			p.Add("", err.Error())
		}
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	if m, ok := tree.(map[string]any); ok {
		for _, k := range rejectedKeys {
			if _, set := m[k]; set {
				p.Add(k, "not supported by the clickhouse sink")
				delete(m, k)
			}
		}
	}
	fields.Decode(tree, &c, "", &p)
	if p.Len() > 0 {
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate returns every problem of c as a *sink.ConfigError with paths
// relative to the sink object, or nil: the rules of the struct tags and,
// when they pass, those between keys and of the mapping. Decode and Open
// call it, so a Config built in Go gets the checks a decoded one gets.
func (c Config) Validate() error {
	return fields.Validate(&c, func(p *fields.Problems) { c.compile(p) })
}

// Open validates c, resolves the password, checks the server (features,
// auto_create, tables and columns) and returns the sink.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func checkIdentifier(name string) string {
	if !identifier.MatchString(name) {
		return fmt.Sprintf("must match %s (got %q)", identifier, name)
	}
	return ""
}

// checkKeys checks the single keys whose rules a hand-built Config could
// break (Decode's tags report them first).
func (c *Config) checkKeys(p *fields.Problems) {
	if msg := c.checkURL(); msg != "" {
		p.Add("url", msg)
	}
	for i, h := range c.EndpointAllowedHosts {
		if strings.ContainsAny(h, "/@") {
			p.Addf(fields.Index("endpoint_allowed_hosts", i), "must be a host name without \"/\" or \"@\" (got %q)", h)
		} else if h != strings.ToLower(h) {
			p.Addf(fields.Index("endpoint_allowed_hosts", i), "must be lower-case (got %q)", h)
		}
	}
	if msg := checkIdentifier(c.Database); msg != "" {
		p.Add("database", msg)
	}
	if msg := checkIdentifier(c.Table); msg != "" {
		p.Add("table", msg)
	}
	if strings.TrimSpace(c.User) == "" || fields.HasControl(c.User) {
		p.Add("user", "must be non-blank, without control characters")
	}
	n := 0
	for _, set := range []bool{c.Password != nil, c.PasswordEnv != nil, c.PasswordFile != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		p.Add("password", "set only one of password, password_env, password_file")
	}
	if c.PasswordEnv != nil && !envName.MatchString(*c.PasswordEnv) {
		p.Addf("password_env", "must match %s (got %q)", envName, *c.PasswordEnv)
	}
	u, _ := url.Parse(c.URL)
	tlsSet := c.TLS.CAFile != nil || c.TLS.CertFile != nil || c.TLS.KeyFile != nil || c.TLS.ServerName != nil || c.TLS.InsecureSkipVerify
	if tlsSet && u != nil && u.Scheme != "https" {
		p.Add("tls", "requires an https url")
	}
	if (c.TLS.CertFile == nil) != (c.TLS.KeyFile == nil) {
		p.Add("tls", "cert_file and key_file must be set together")
	}
	if c.RequestTimeoutMS < 1000 || c.RequestTimeoutMS > 600000 {
		p.Addf("request_timeout_ms", "must be between 1000 and 600000 (got %d)", c.RequestTimeoutMS)
	}
	if m := c.MaxRowsPerInsert; m != nil && (*m < 1 || *m > 10000) {
		p.Addf("max_rows_per_insert", "must be between 1 and 10000 (got %d)", *m)
	}
	if c.MaxRequestBytes < 65536 || c.MaxRequestBytes > 1<<30 {
		p.Addf("max_request_bytes", "must be between 65536 and 1073741824 (got %d)", c.MaxRequestBytes)
	}
	if c.Compression != "none" && c.Compression != "gzip" {
		p.Addf("compression", "must be one of none, gzip (got %q)", c.Compression)
	}
	if q := c.InsertQuorum; q != nil && (*q < 2 || *q > 16) {
		p.Addf("insert_quorum", "must be between 2 and 16 (got %d)", *q)
	}
}

// checkURL returns the problem with the URL, or "".
func (c *Config) checkURL() string {
	if c.URL == "" {
		return "required"
	}
	r := urlcheck.Rules{
		SchemeProblem:   "must use http or https",
		UserInfoProblem: "must not include credentials; use sink.user and sink.password_env",
		MaxPathLen:      2048,
		AllowedHosts:    c.EndpointAllowedHosts,
	}
	if !c.AllowPlaintextHTTP {
		r.HTTPLoopbackProblem = "http is allowed only for localhost, 127.0.0.1 or ::1 unless allow_plaintext_http"
	}
	return r.Check(c.URL)
}

// PayloadReads returns the settings that read fields of the payload: in
// layout mapped, each mapping item whose path is a JSON Pointer and the
// payload_field of strategy payload_field, for the sink's table and every
// route. The loader refuses them on subjects payload encryption applies to
// (docs/clickhouse.md#encrypted-payloads).
func (c Config) PayloadReads() []string {
	if c.Layout != "mapped" {
		return nil
	}
	var out []string
	add := func(idem *Idempotency, idemPath string, items []sqlconfig.MappingItem, mappingPath string) {
		if idem != nil && idem.Strategy == "payload_field" {
			out = append(out, idemPath+".payload_field")
		}
		for i, it := range items {
			if mapping.ReadsPayload(it.Path) {
				out = append(out, fields.Index(mappingPath, i)+".path")
			}
		}
	}
	add(&c.Idempotency, "idempotency", c.Mapping, "mapping")
	for i, r := range c.TableRoutes {
		rp := fields.Index("table_routes", i)
		var items []sqlconfig.MappingItem
		if r.Mapping != nil {
			items = *r.Mapping
		}
		add(r.Idempotency, rp+".idempotency", items, rp+".mapping")
	}
	return out
}

var _ sink.PayloadReader = Config{}
