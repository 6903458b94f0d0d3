// Package segments is the segments sink: many records per file, for data
// lakes and for throughput past the one-file-per-message limit of the file
// sink (docs/segments.md).
//
// A segment is one JSON Lines file receiving the records of one partition
// until it is rolled by records, bytes or age. It is built under a hidden
// name (.<segment id><ext>.open) in its partition directory and renamed to
// <first seq>-<last seq>-<segment id><ext> when it closes. Each batch is
// appended and fdatasynced before its messages are reported Committed, so
// acknowledgement latency stays one batch; a crash leaves at most a torn last
// line, which start-up recovery cuts off before it finishes the segment.
package segments

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/s3conn"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// Config is the segments sink's configuration. Default returns it with every
// default; Decode fills it from a "sink" object.
type Config struct {
	Type            string `json:"type" trim:"true" lower:"true" enum:"segments" doc:"Sink type."`
	Target          string `json:"target" enum:"local,s3" doc:"Where segments are written: local, a directory on this host; s3, objects in a bucket of Amazon S3 or an S3-compatible store (acknowledged when its segment's upload completed)."`
	Directory       string `json:"directory" doc:"local only, required there: root directory of the lake; a leading ~ is expanded to the home directory."`
	CreateDirectory bool   `json:"create_directory" doc:"local only: create a missing root directory at start."`
	Fsync           bool   `json:"fsync" doc:"local only: fdatasync each append before acknowledging, and fsync directories; false survives a process crash, not a host crash."`

	Bucket                   string  `json:"bucket" doc:"s3 only, required there: bucket name, 3-63 characters of a-z, 0-9, '.', '-'; no '..', '.-', '-.'; not an IP address."`
	EndpointURL              *string `json:"endpoint_url" blanknull:"true" doc:"s3 only: S3-compatible endpoint http(s)://host[:port] (no credentials, path, query or fragment); path-style addressing is used with it. null means AWS's regional endpoint."`
	AllowHTTPForLocalTesting bool    `json:"allow_http_for_local_testing" doc:"s3 only: allow an http endpoint_url whose host is localhost, 127.0.0.1 or ::1."`
	RegionName               *string `json:"region_name" blanknull:"true" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" doc:"s3 only: AWS region; null means the SDK's resolution (AWS_REGION, profile), else us-east-1."`
	CredentialMode           string  `json:"credential_mode" enum:"default_chain,environment,profile" doc:"s3 only: default_chain, the SDK's default credential chain; environment, keys from the variables named by aws_*_env; profile, the shared-config profile profile_name."`
	ProfileName              *string `json:"profile_name" pattern:"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$" doc:"s3 only: shared-config profile; only with credential_mode profile, where it is required."`
	AWSAccessKeyIDEnv        *string `json:"aws_access_key_id_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"s3 only: environment variable holding the access key id; credential_mode environment only (required there)."`
	AWSSecretAccessKeyEnv    *string `json:"aws_secret_access_key_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"s3 only: environment variable holding the secret access key; credential_mode environment only (required there)."`
	AWSSessionTokenEnv       *string `json:"aws_session_token_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"s3 only: environment variable holding a session token; credential_mode environment only."`
	ServerSideEncryption     string  `json:"server_side_encryption" enum:"none,AES256" doc:"s3 only: server-side encryption requested for every object."`
	RequestTimeoutSeconds    float64 `json:"request_timeout_seconds" xmin:"0" max:"300" doc:"s3 only: timeout of one request attempt."`
	StagingDirectory         *string `json:"staging_directory" blanknull:"true" doc:"s3 only: where open segments are built before their upload; created at start (mode 0700); null means nats-sink-segments in the OS temporary directory."`
	MultipartPartBytes       int     `json:"multipart_part_bytes" min:"5242880" max:"536870912" doc:"s3 only: a larger segment is uploaded in parts of this many bytes, at most 4 at once."`

	Prefix           *string                 `json:"prefix" blanknull:"true" maxlen:"1024" doc:"Path prefix below the directory: '/'-separated segments (each ^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$, not '.' or '..'), without leading or trailing '/'. Blank or null means none."`
	Partition        string                  `json:"partition" maxlen:"512" doc:"Partition template: '/'-separated levels of literal [A-Za-z0-9_.=-] and the placeholders {stream}, {subject}, {yyyy}, {mm}, {dd}, {hh}; empty means no partition directories."`
	PartitionTime    string                  `json:"partition_time" enum:"received,jetstream" doc:"Time the date placeholders use: received (the envelope's received_at) or jetstream (the JetStream timestamp, received_at when unknown); UTC."`
	Format           string                  `json:"format" enum:"jsonl,parquet" doc:"Segment format: jsonl, JSON Lines (one file record per line), acknowledged per append; parquet, acknowledged when its segment is committed (held mode)."`
	Compression      *string                 `json:"compression" enum:"none,gzip,zstd,snappy" doc:"jsonl: none, gzip or zstd, one gzip member or zstd frame per append; parquet: zstd, snappy, gzip or none, per page. Null means none (jsonl) or zstd (parquet)."`
	CompressionLevel *int                    `json:"compression_level" min:"1" max:"22" doc:"gzip 1..9, zstd 1..22 (mapped to the encoder's nearest level); null means gzip 6, zstd 3; must be null with none and snappy."`
	PayloadMode      string                  `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised into the record."`
	IncludeMetadata  bool                    `json:"include_metadata" doc:"Add the standard metadata document to each record (key metadata)."`
	Mapping          []sqlconfig.MappingItem `json:"mapping" maxitems:"256" doc:"parquet only: mapped payload columns after the fixed columns, in this order; types text, bigint, double, boolean, timestamp (docs/segments.md#mapped-columns)."`
	LenientStrings   bool                    `json:"lenient_strings" doc:"parquet only: numeric, boolean and epoch inputs of mapped columns may also be JSON strings."`
	RowGroupRecords  *int                    `json:"row_group_records" min:"1" max:"1000000" doc:"parquet only: rows per row group; null means 10000."`
	MaxRecords       *int                    `json:"max_records" min:"1" max:"10000000" doc:"Most records in one segment; null means 100000 (jsonl on local disk) or 10000 (held mode)."`
	MaxBytes         int64                   `json:"max_bytes" min:"1048576" max:"4294967296" doc:"A segment closes before an append would take it past this size in bytes (after compression); one larger append forms a segment alone."`
	MaxAgeMS         int                     `json:"max_age_ms" min:"1000" max:"86400000" doc:"A segment closes this long after its first append; checked every second."`
	MaxOpenSegments  int                     `json:"max_open_segments" min:"1" max:"4096" doc:"Most segments open at once; opening one more first closes the one with the oldest first append."`
	MaxHeldMessages  *int                    `json:"max_held_messages" min:"1" max:"100000000" doc:"Held mode only: most messages held unacknowledged in open segments; at least delivery.batch_size; null means 2 × max_records."`
	CommitTimeoutMS  *int                    `json:"commit_timeout_ms" min:"1000" max:"3600000" doc:"Held mode only: how long a failing segment commit is retried before its messages are redelivered; null means 120000."`

	// Set when the key was present in the decoded document: a key of the
	// other target is an error even when it holds its default.
	DirectorySet            bool `json:"-" presence:"directory"`
	CreateDirectorySet      bool `json:"-" presence:"create_directory"`
	FsyncSet                bool `json:"-" presence:"fsync"`
	AllowHTTPSet            bool `json:"-" presence:"allow_http_for_local_testing"`
	CredentialModeSet       bool `json:"-" presence:"credential_mode"`
	ServerSideEncryptionSet bool `json:"-" presence:"server_side_encryption"`
	RequestTimeoutSet       bool `json:"-" presence:"request_timeout_seconds"`
	MultipartPartBytesSet   bool `json:"-" presence:"multipart_part_bytes"`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default.
func Default() Config {
	return Config{
		Type:            "segments",
		Target:          "local",
		CreateDirectory: true,
		Fsync:           true,
		Partition:       "{stream}/{yyyy}/{mm}/{dd}/{hh}",
		PartitionTime:   "received",
		Format:          "jsonl",
		PayloadMode:     string(record.JSONOrEnvelope),
		IncludeMetadata: true,
		MaxBytes:        128 << 20,
		MaxAgeMS:        60000,
		MaxOpenSegments: 64,
		Mapping:         []sqlconfig.MappingItem{},

		CredentialMode:        "default_chain",
		ServerSideEncryption:  "none",
		RequestTimeoutSeconds: 10,
		MultipartPartBytes:    16 << 20,
	}
}

// Decode validates one segments "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("directory: required").
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	// Exact numbers: a mapping default keeps the value written.
	if err := fields.DecodeSinkExact(raw, &c); err != nil {
		return nil, err
	}
	dir, err := expandHome(c.Directory)
	if err != nil {
		return nil, &sink.ConfigError{Problems: []sink.Problem{{Path: "directory", Message: err.Error()}}}
	}
	c.Directory = dir
	return c, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	c.targetRules(p)
	if c.Prefix != nil {
		if msg := s3conn.CheckPrefix(*c.Prefix); msg != "" {
			p.Add("prefix", msg)
		}
	}
	if _, err := parseTemplate(c.Partition); err != nil {
		p.Add("partition", err.Error())
	}
	parquet := c.Format == "parquet"
	if c.Compression != nil && !parquet && *c.Compression == "snappy" {
		p.Add("compression", "snappy is only allowed with format parquet")
	}
	if c.RowGroupRecords != nil && !parquet {
		p.Add("row_group_records", "only allowed with format parquet")
	}
	if len(c.Mapping) > 0 && !parquet {
		p.Add("mapping", "only allowed with format parquet")
	}
	if c.LenientStrings && !parquet {
		p.Add("lenient_strings", "only allowed with format parquet")
	}
	if parquet {
		compileMapping(c, p)
	}
	if !c.held() {
		if c.MaxHeldMessages != nil {
			p.Add("max_held_messages", "only allowed with format parquet or target s3")
		}
		if c.CommitTimeoutMS != nil {
			p.Add("commit_timeout_ms", "only allowed with format parquet or target s3")
		}
	}
	if c.CompressionLevel != nil {
		switch comp := c.compression(); comp {
		case "none", "snappy":
			p.Addf("compression_level", "must be null with compression %s", comp)
		case "gzip":
			if *c.CompressionLevel > 9 {
				p.Addf("compression_level", "must be between 1 and 9 with compression gzip (got %d)", *c.CompressionLevel)
			}
		}
	}
}

// compression returns the effective compression.
func (c *Config) compression() string {
	switch {
	case c.Compression != nil:
		return *c.Compression
	case c.Format == "parquet":
		return "zstd"
	}
	return "none"
}

// held reports whether messages wait for their segment's commit (parquet,
// and every s3 segment) instead of being acknowledged per append.
func (c *Config) held() bool { return c.Format == "parquet" || c.Target == "s3" }

// maxHeld returns the effective max_held_messages (0 outside held mode).
func (c *Config) maxHeld() int {
	switch {
	case !c.held():
		return 0
	case c.MaxHeldMessages != nil:
		return *c.MaxHeldMessages
	}
	return 2 * c.maxRecords()
}

// commitTimeout returns the effective commit_timeout_ms.
func (c *Config) commitTimeout() time.Duration {
	if c.CommitTimeoutMS == nil {
		return 120 * time.Second
	}
	return time.Duration(*c.CommitTimeoutMS) * time.Millisecond
}

// rowGroupRecords returns the effective row_group_records.
func (c *Config) rowGroupRecords() int {
	if c.RowGroupRecords == nil {
		return 10000
	}
	return *c.RowGroupRecords
}

// level returns the effective compression level.
func (c *Config) level() int {
	switch {
	case c.CompressionLevel != nil:
		return *c.CompressionLevel
	case c.compression() == "gzip":
		return 6
	}
	return 3
}

// maxRecords returns the effective max_records.
func (c *Config) maxRecords() int {
	switch {
	case c.MaxRecords != nil:
		return *c.MaxRecords
	case c.held():
		return 10000
	}
	return 100000
}

// ext returns the final-name extension of the configured format and
// compression.
func (c *Config) ext() string {
	if c.Format == "parquet" {
		return ".parquet"
	}
	switch c.compression() {
	case "gzip":
		return ".jsonl.gz"
	case "zstd":
		return ".jsonl.zst"
	}
	return ".jsonl"
}

// targetRules checks the keys that belong to one target: the directory keys
// to local, the connection and staging keys to s3.
func (c *Config) targetRules(p *fields.Problems) {
	local := c.Target != "s3"
	only := func(key string, given bool, target string) {
		if given {
			p.Addf(key, "only allowed with target %s", target)
		}
	}
	if local {
		switch {
		case strings.TrimSpace(c.Directory) == "" && (c.DirectorySet || c.Directory != ""):
			p.Add("directory", "must not be empty")
		case c.Directory == "":
			p.Add("directory", "required")
		case strings.ContainsRune(c.Directory, 0):
			p.Add("directory", "must not contain NUL")
		}
		only("bucket", c.Bucket != "", "s3")
		only("endpoint_url", c.EndpointURL != nil, "s3")
		only("allow_http_for_local_testing", c.AllowHTTPSet || c.AllowHTTPForLocalTesting, "s3")
		only("region_name", c.RegionName != nil, "s3")
		only("credential_mode", c.CredentialModeSet, "s3")
		only("profile_name", c.ProfileName != nil, "s3")
		only("aws_access_key_id_env", c.AWSAccessKeyIDEnv != nil, "s3")
		only("aws_secret_access_key_env", c.AWSSecretAccessKeyEnv != nil, "s3")
		only("aws_session_token_env", c.AWSSessionTokenEnv != nil, "s3")
		only("server_side_encryption", c.ServerSideEncryptionSet, "s3")
		only("request_timeout_seconds", c.RequestTimeoutSet, "s3")
		only("staging_directory", c.StagingDirectory != nil, "s3")
		only("multipart_part_bytes", c.MultipartPartBytesSet, "s3")
		return
	}
	only("directory", c.DirectorySet || c.Directory != "", "local")
	only("create_directory", c.CreateDirectorySet, "local")
	only("fsync", c.FsyncSet, "local")
	if c.Bucket == "" {
		p.Add("bucket", "required with target s3")
	} else if !bucketName.MatchString(c.Bucket) {
		p.Addf("bucket", "must match %s (got %q)", bucketName, c.Bucket)
	} else if msg := s3conn.CheckBucket(c.Bucket); msg != "" {
		p.Add("bucket", msg)
	}
	if c.EndpointURL != nil {
		if msg := s3conn.CheckEndpoint(*c.EndpointURL, c.AllowHTTPForLocalTesting); msg != "" {
			p.Add("endpoint_url", msg)
		}
	}
	st := c.settings()
	st.CredentialProblems(p.Addf)
	if c.StagingDirectory != nil && strings.ContainsRune(*c.StagingDirectory, 0) {
		p.Add("staging_directory", "must not contain NUL")
	}
}

// bucketName is the s3 sink's bucket pattern.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// settings returns the S3 connection keys.
func (c *Config) settings() s3conn.Settings {
	return s3conn.Settings{
		Name:                     "segments sink",
		EndpointURL:              c.EndpointURL,
		AllowHTTPForLocalTesting: c.AllowHTTPForLocalTesting,
		RegionName:               c.RegionName,
		CredentialMode:           c.CredentialMode,
		ProfileName:              c.ProfileName,
		AccessKeyIDEnv:           c.AWSAccessKeyIDEnv,
		SecretAccessKeyEnv:       c.AWSSecretAccessKeyEnv,
		SessionTokenEnv:          c.AWSSessionTokenEnv,
		MaxIdleConnsPerHost:      16,
	}
}

// expandHome expands a leading "~" or "~user" the way a shell does.
func expandHome(dir string) (string, error) {
	if !strings.HasPrefix(dir, "~") {
		return dir, nil
	}
	name, rest, _ := strings.Cut(dir[1:], "/")
	var home string
	if name == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand ~: %w", err)
		}
		home = h
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return "", fmt.Errorf("cannot expand ~%s: %w", name, err)
		}
		home = u.HomeDir
	}
	return filepath.Join(home, rest), nil
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}
