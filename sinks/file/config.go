// Package file is the file sink: one JSON record file per message, written
// atomically under a deterministic name (docs/file-sink.md, docs/formats.md#file-records).
//
// A record is first written to a temp file in its target directory (an
// unnamed O_TMPFILE file on Linux, else .<name>.<random>.tmp), made durable,
// and only then linked into place, so a name never points at partial or
// unsynced data. Redelivery finds the same name again: skip_existing turns it
// into a no-op, overwrite rewrites it, fail dead-letters it.
package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the file sink's configuration (docs/file-sink.md). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type               string `json:"type" trim:"true" lower:"true" enum:"file" doc:"Sink type."`
	Directory          string `json:"directory" required:"true" nonblank:"true" doc:"Root directory of the records; a leading ~ is expanded to the home directory."`
	Mode               string `json:"mode" enum:"one_file_per_message" doc:"Write mode; one file per message is the only one."`
	FilenameStrategy   string `json:"filename_strategy" enum:"stream_sequence,message_id,payload_sha256" doc:"What the file name is derived from (docs/formats.md#idempotency-keys)."`
	DuplicatePolicy    string `json:"duplicate_policy" enum:"skip_existing,overwrite,fail" doc:"What happens when the file already exists, e.g. on redelivery."`
	PayloadMode        string `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised into the record (docs/formats.md#payload-normalisation)."`
	Extension          string `json:"extension" doc:"File name extension; defaults to .json, or .json.gz with gzip. Starts with a dot, is not . or .., holds no / or \\, and is at most 75 bytes with filename_strategy stream_sequence, 96 with message_id, 31 with payload_sha256 (the longest name's temporary file must fit in 255 bytes)."`
	Compression        string `json:"compression" enum:"none,gzip" doc:"Compress each record file."`
	CompressionLevel   int    `json:"compression_level" min:"1" max:"9" doc:"gzip level."`
	IncludeMetadata    bool   `json:"include_metadata" doc:"Add the standard metadata document to each record."`
	PartitionBySubject bool   `json:"partition_by_subject" doc:"Write each subject into its own sub-directory."`
	CreateDirectory    bool   `json:"create_directory" doc:"Create a missing root directory at start."`
	Fsync              bool   `json:"fsync" doc:"Make each file and its directory entry durable before acknowledging."`
	Pretty             bool   `json:"pretty" doc:"Indent records (two spaces, one item per line)."`

	// ExtensionSet records whether the object named an extension, so that
	// the gzip default (.json.gz) applies only when it did not. In Go, an
	// empty Extension means the default.
	ExtensionSet bool `json:"-" presence:"extension"`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/file-sink.md.
// Extension stays empty until Decode or New derives it from Compression.
func Default() Config {
	return Config{
		Type:               "file",
		Mode:               "one_file_per_message",
		FilenameStrategy:   "stream_sequence",
		DuplicatePolicy:    "skip_existing",
		PayloadMode:        string(record.JSONOrEnvelope),
		Compression:        "none",
		CompressionLevel:   6,
		IncludeMetadata:    true,
		PartitionBySubject: true,
		CreateDirectory:    true,
		Fsync:              true,
	}
}

// Decode validates one file "sink" object without I/O and returns its
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
	c.Extension = c.extension()
	return c, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express. Problems have paths relative to the sink
// object and come back as one *sink.ConfigError, or nil. Decode calls it on
// the decoded object, New before anything else, so a Config built in Go is
// checked like a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

func (c *Config) rules(p *fields.Problems) {
	if strings.ContainsRune(c.Directory, 0) {
		p.Add("directory", "must not contain NUL")
	}
	if c.ExtensionSet || c.Extension != "" {
		if msg := checkExtension(c.Extension); msg != "" {
			p.Add("extension", msg)
		} else if max := maxExtension(c.FilenameStrategy); len(c.Extension) > max {
			// Checked here, not per message: a name over the limit fails
			// every write alike, which would stall the stream.
			p.Addf("extension", "is %d bytes; with filename_strategy %s the temporary file name would exceed the 255 bytes a file name may have (at most %d bytes)",
				len(c.Extension), c.FilenameStrategy, max)
		}
	}
}

// Name lengths, in bytes, that bound the extension: a file name may have
// nameMax bytes (Linux and the common filesystems); a named temp file adds
// tempOverhead to the final name (".<name>.<16 hex>.tmp"); a sanitised
// value is at most safeMax bytes (record.SafeDistinct: 120 kept characters
// and "-" + 16 hex, or 80 + "-" + 32 hex).
const (
	nameMax      = 255
	tempOverhead = 1 + 1 + 16 + len(tempSuffix)
	safeKept     = 120
	safeMax      = safeKept + 1 + 16
)

// maxExtension returns the longest extension whose worst-case name under
// strategy still has a temp name of at most nameMax bytes.
func maxExtension(strategy string) int {
	stem := safeMax + 1 + 20 // stream_sequence: <stream>-<20 digits>
	switch strategy {
	case record.StrategyMessageID:
		stem = safeKept + 1 + 16 // <safe(id)>-<16 hex>
	case record.StrategyPayloadSHA256:
		stem = safeMax + 1 + 64 // <subject>-<64 hex>
	}
	return nameMax - tempOverhead - stem
}

// checkExtension returns the problem with an extension, or "".
func checkExtension(ext string) string {
	switch {
	case !strings.HasPrefix(ext, "."):
		return fmt.Sprintf("must start with \".\" (got %q)", ext)
	case ext == "." || ext == "..":
		return fmt.Sprintf("must not be \".\" or \"..\" (got %q)", ext)
	case strings.ContainsAny(ext, "/\\\x00"):
		return fmt.Sprintf("must not contain \"/\" or \"\\\" (got %q)", ext)
	}
	return ""
}

// extension returns the configured extension or its derived default.
func (c Config) extension() string {
	if c.ExtensionSet || c.Extension != "" {
		return c.Extension
	}
	if c.Compression == "gzip" {
		return ".json.gz"
	}
	return ".json"
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
