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
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the segments sink's configuration. Default returns it with every
// default; Decode fills it from a "sink" object.
type Config struct {
	Type             string  `json:"type" trim:"true" lower:"true" enum:"segments" doc:"Sink type."`
	Target           string  `json:"target" enum:"local" doc:"Where segments are written: local, a directory on this host."`
	Directory        string  `json:"directory" required:"true" nonblank:"true" doc:"Root directory of the lake; a leading ~ is expanded to the home directory."`
	CreateDirectory  bool    `json:"create_directory" doc:"Create a missing root directory at start."`
	Fsync            bool    `json:"fsync" doc:"fdatasync each append before acknowledging, and fsync directories; false survives a process crash, not a host crash."`
	Prefix           *string `json:"prefix" blanknull:"true" maxlen:"1024" doc:"Path prefix below the directory: '/'-separated segments (each ^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$, not '.' or '..'), without leading or trailing '/'. Blank or null means none."`
	Partition        string  `json:"partition" maxlen:"512" doc:"Partition template: '/'-separated levels of literal [A-Za-z0-9_.=-] and the placeholders {stream}, {subject}, {yyyy}, {mm}, {dd}, {hh}; empty means no partition directories."`
	PartitionTime    string  `json:"partition_time" enum:"received,jetstream" doc:"Time the date placeholders use: received (the envelope's received_at) or jetstream (the JetStream timestamp, received_at when unknown); UTC."`
	Format           string  `json:"format" enum:"jsonl,parquet" doc:"Segment format: jsonl, JSON Lines (one file record per line), acknowledged per append; parquet, acknowledged when its segment is committed (held mode)."`
	Compression      *string `json:"compression" enum:"none,gzip,zstd,snappy" doc:"jsonl: none, gzip or zstd, one gzip member or zstd frame per append; parquet: zstd, snappy, gzip or none, per page. Null means none (jsonl) or zstd (parquet)."`
	CompressionLevel *int    `json:"compression_level" min:"1" max:"22" doc:"gzip 1..9, zstd 1..22 (mapped to the encoder's nearest level); null means gzip 6, zstd 3; must be null with none and snappy."`
	PayloadMode      string  `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised into the record."`
	IncludeMetadata  bool    `json:"include_metadata" doc:"Add the standard metadata document to each record (key metadata)."`
	RowGroupRecords  *int    `json:"row_group_records" min:"1" max:"1000000" doc:"parquet only: rows per row group; null means 10000."`
	MaxRecords       *int    `json:"max_records" min:"1" max:"10000000" doc:"Most records in one segment; null means 100000 (jsonl on local disk) or 10000 (held mode)."`
	MaxBytes         int64   `json:"max_bytes" min:"1048576" max:"4294967296" doc:"A segment closes before an append would take it past this size in bytes (after compression); one larger append forms a segment alone."`
	MaxAgeMS         int     `json:"max_age_ms" min:"1000" max:"86400000" doc:"A segment closes this long after its first append; checked every second."`
	MaxOpenSegments  int     `json:"max_open_segments" min:"1" max:"4096" doc:"Most segments open at once; opening one more first closes the one with the oldest first append."`
	MaxHeldMessages  *int    `json:"max_held_messages" min:"1" max:"100000000" doc:"Held mode only: most messages held unacknowledged in open segments; at least delivery.batch_size; null means 2 × max_records."`
	CommitTimeoutMS  *int    `json:"commit_timeout_ms" min:"1000" max:"3600000" doc:"Held mode only: how long a failing segment commit is retried before its messages are redelivered; null means 120000."`
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
	}
}

// Decode validates one segments "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object ("directory: required").
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
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
	if strings.ContainsRune(c.Directory, 0) {
		p.Add("directory", "must not contain NUL")
	}
	if c.Prefix != nil {
		if msg := checkPrefix(*c.Prefix); msg != "" {
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
	if !c.held() {
		if c.MaxHeldMessages != nil {
			p.Add("max_held_messages", "only allowed with format parquet")
		}
		if c.CommitTimeoutMS != nil {
			p.Add("commit_timeout_ms", "only allowed with format parquet")
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

// held reports whether messages wait for their segment's commit (parquet)
// instead of being acknowledged per append.
func (c *Config) held() bool { return c.Format == "parquet" }

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

var prefixSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$`)

// checkPrefix returns the problem with prefix, or "": the rules of the s3
// sink's key prefix, so that one layout works on both targets.
func checkPrefix(p string) string {
	switch {
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/"):
		return fmt.Sprintf("must not start or end with \"/\" (got %q)", p)
	case strings.Contains(p, "//"):
		return fmt.Sprintf("must not contain \"//\" (got %q)", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("segment %q is not allowed", seg)
		}
		if !prefixSegment.MatchString(seg) {
			return fmt.Sprintf("segment %q must match %s", seg, prefixSegment)
		}
	}
	return ""
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
