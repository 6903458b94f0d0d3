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
	Format           string  `json:"format" enum:"jsonl" doc:"Segment format: jsonl, JSON Lines (one file record per line)."`
	Compression      *string `json:"compression" enum:"none,gzip,zstd" doc:"Compression of each append (one gzip member or zstd frame per append); null means none."`
	CompressionLevel *int    `json:"compression_level" min:"1" max:"22" doc:"gzip 1..9, zstd 1..22 (mapped to the encoder's nearest level); null means gzip 6, zstd 3; must be null with none."`
	PayloadMode      string  `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised into the record."`
	IncludeMetadata  bool    `json:"include_metadata" doc:"Add the standard metadata document to each record (key metadata)."`
	MaxRecords       *int    `json:"max_records" min:"1" max:"10000000" doc:"Most records in one segment; null means 100000."`
	MaxBytes         int64   `json:"max_bytes" min:"1048576" max:"4294967296" doc:"A segment closes before an append would take it past this size in bytes (after compression); one larger append forms a segment alone."`
	MaxAgeMS         int     `json:"max_age_ms" min:"1000" max:"86400000" doc:"A segment closes this long after its first append; checked every second."`
	MaxOpenSegments  int     `json:"max_open_segments" min:"1" max:"4096" doc:"Most segments open at once; opening one more first closes the one with the oldest first append."`
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
	if c.CompressionLevel != nil {
		switch comp := c.compression(); comp {
		case "none":
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
	if c.Compression == nil {
		return "none"
	}
	return *c.Compression
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
	if c.MaxRecords == nil {
		return 100000
	}
	return *c.MaxRecords
}

// ext returns the final-name extension of the configured format and
// compression.
func (c *Config) ext() string {
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
