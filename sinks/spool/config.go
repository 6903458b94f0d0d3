// Package spool is the edge spool sink: local disk as the durable
// destination. Each message becomes one file in the spool directory, named
// by the SHA-256 of its core idempotency key and normally encrypted, and is
// acknowledged once that file is committed. Forwarding to the final
// destination is a separate at-least-once step, Replay (the replay-spool
// command), which never talks to NATS and deletes a file only after its
// target committed the record. The file format is upstream's, so either
// implementation replays the other's spool (docs/spool.md).
package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the spool sink's configuration. Default returns it with every
// default; Decode fills it from a "sink" object.
type Config struct {
	Type              string     `json:"type" trim:"true" lower:"true" enum:"spool" doc:"Sink type."`
	Directory         string     `json:"directory" required:"true" nonblank:"true" doc:"Spool directory; a leading ~ is expanded to the home directory. Created with mode 0700."`
	MaxRecords        int        `json:"max_records" min:"1" max:"10000000" doc:"Most spool files at once; a full spool refuses new messages (they stay unacknowledged)."`
	MaxBytes          int64      `json:"max_bytes" min:"1048576" max:"1099511627776" doc:"Most bytes of spool files at once."`
	DuplicatePolicy   string     `json:"duplicate_policy" enum:"skip_existing,fail" doc:"What a redelivered message whose file exists becomes: a duplicate, or a dead letter."`
	PayloadMode       string     `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Shapes payload_preview only; replay sends the original bytes."`
	IncludeMetadata   bool       `json:"include_metadata" doc:"Store the standard metadata document in each record."`
	CreateDirectory   bool       `json:"create_directory" doc:"Create a missing directory at start."`
	Fsync             bool       `json:"fsync" doc:"Make each file and the directory durable before acknowledging."`
	Pretty            bool       `json:"pretty" doc:"Indent the wrapper file (an encrypted record stays compact)."`
	DrainOrdering     string     `json:"drain_ordering" enum:"priority,fifo" doc:"replay-spool order: priority rank then age, or age only."`
	DeleteAfterReplay bool       `json:"delete_after_replay" doc:"replay-spool deletes a file once its target committed it; false replays every file again next time."`
	Encryption        Encryption `json:"encryption" doc:"Record encryption (the keys of the top-level encryption section)."`
	AllowUnencrypted  bool       `json:"allow_unencrypted" doc:"Permit plaintext records (local development only)."`
}

// Encryption is sink.encryption: the whole spool record is encrypted with
// these settings, independently of the top-level payload encryption.
type Encryption struct {
	Enabled        bool             `json:"enabled" doc:"Encrypt every spool record."`
	Algorithm      string           `json:"algorithm" trim:"true" lower:"true" replace:"_=-" enum:"aes-256-gcm,aes-256-ccm"`
	KeyID          string           `json:"key_id" nonblank:"true" maxlen:"128" doc:"Stored in every record envelope; replay checks it."`
	KeyB64         *secret.Value    `json:"key_b64" secret:"true" doc:"Standard padded base64 of exactly 32 bytes; only one of key_b64, key_b64_env, key_b64_file."`
	KeyB64Env      *string          `json:"key_b64_env" nonblank:"true" doc:"Environment variable holding the base64 key; read when the sink starts."`
	KeyB64File     *string          `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the base64 key (one trailing newline removed)."`
	NonceSizeBytes int              `json:"nonce_size_bytes" min:"7" max:"13" doc:"aes-256-gcm requires 8..13."`
	TagLength      int              `json:"tag_length" enum:"4,6,8,10,12,14,16" doc:"CCM only; GCM always uses 16."`
	Rules          []EncryptionRule `json:"rules" doc:"Accepted for upstream compatibility and ignored: records use the section's own key."`
}

// EncryptionRule is one item of sink.encryption.rules, which the spool sink
// accepts (upstream did) and ignores.
type EncryptionRule struct {
	Subject        string        `json:"subject" required:"true" nonblank:"true"`
	Enabled        bool          `json:"enabled"`
	Algorithm      *string       `json:"algorithm" null:"reject" trim:"true" lower:"true" replace:"_=-" enum:"aes-256-gcm,aes-256-ccm"`
	KeyID          *string       `json:"key_id" null:"reject" nonblank:"true" maxlen:"128"`
	KeyB64         *secret.Value `json:"key_b64" secret:"true"`
	KeyB64Env      *string       `json:"key_b64_env" nonblank:"true"`
	KeyB64File     *string       `json:"key_b64_file" nonblank:"true" nopad:"true" nocontrol:"true"`
	NonceSizeBytes *int          `json:"nonce_size_bytes" null:"reject" min:"7" max:"13"`
	TagLength      *int          `json:"tag_length" null:"reject" enum:"4,6,8,10,12,14,16"`
}

// SetDefaults sets a rule's defaults before its object is decoded.
func (r *EncryptionRule) SetDefaults() { *r = EncryptionRule{Enabled: true} }

// Default returns the configuration with every default. Directory is
// empty and required.
func Default() Config {
	return Config{
		Type:              "spool",
		MaxRecords:        100000,
		MaxBytes:          10 << 30,
		DuplicatePolicy:   "skip_existing",
		PayloadMode:       string(record.JSONOrEnvelope),
		IncludeMetadata:   true,
		CreateDirectory:   true,
		Fsync:             true,
		DrainOrdering:     "priority",
		DeleteAfterReplay: true,
		Encryption: Encryption{
			Algorithm:      seal.AES256GCM,
			KeyID:          "default",
			NonceSizeBytes: 12,
			TagLength:      16,
			Rules:          []EncryptionRule{},
		},
	}
}

// Decode validates one spool "sink" object without I/O and returns its
// Config. Every problem is reported at once, as one *sink.ConfigError with
// paths relative to the sink object, in schema order.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	var p fields.Problems
	tree, err := jsonx.Parse(raw)
	if err != nil {
		if pe, ok := errors.AsType[*jsonx.PathError](err); ok {
			p.Add(pe.Path, pe.Message)
		} else {
			p.Add("", err.Error())
		}
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	fields.Decode(tree, &c, "", &p)
	// The rules the tags express are checked again by Validate, for
	// configurations built by hand; keep the decoder's problem at a path.
	seen := map[string]bool{}
	for _, pr := range p.List() {
		seen[pr.Path] = true
	}
	if ce, ok := errors.AsType[*sink.ConfigError](c.Validate()); ok {
		for _, pr := range ce.Problems {
			if !seen[pr.Path] {
				p.Add(pr.Path, pr.Message)
			}
		}
	}
	if p.Len() > 0 {
		return nil, &sink.ConfigError{Problems: p.List()}
	}
	return c, nil
}

// ConfigOf returns the Config behind an Opener that Decode returned.
func ConfigOf(op sink.Opener) (Config, bool) {
	c, ok := op.(Config)
	return c, ok
}

// Validate checks every rule of the configuration without I/O and returns
// all problems as one *sink.ConfigError (paths relative to the sink
// object), or nil. Open calls it first, so a Config built by hand gets the
// same checks as one decoded from a file.
func (c Config) Validate() error {
	var p fields.Problems
	if c.Type != "spool" {
		p.Addf("type", "must be one of spool (got %q)", c.Type)
	}
	switch {
	case c.Directory == "":
		p.Add("directory", "required")
	case strings.TrimSpace(c.Directory) == "":
		p.Add("directory", "must not be empty")
	case strings.ContainsRune(c.Directory, 0):
		p.Add("directory", "must not contain NUL")
	}
	if c.MaxRecords < 1 || c.MaxRecords > 10_000_000 {
		p.Addf("max_records", "must be between 1 and 10000000 (got %d)", c.MaxRecords)
	}
	if c.MaxBytes < 1<<20 || c.MaxBytes > 1<<40 {
		p.Addf("max_bytes", "must be between 1048576 and 1099511627776 (got %d)", c.MaxBytes)
	}
	oneOf(&p, "duplicate_policy", c.DuplicatePolicy, "skip_existing", "fail")
	oneOf(&p, "payload_mode", c.PayloadMode, "json_or_envelope", "json_only", "text_envelope", "bytes_envelope")
	oneOf(&p, "drain_ordering", c.DrainOrdering, "priority", "fifo")
	c.Encryption.validate(&p)
	if !c.Encryption.Enabled && !c.AllowUnencrypted {
		p.Add("encryption.enabled", "the spool sink requires record encryption; set it to true (or set sink.allow_unencrypted to true for local development)")
	}
	if p.Len() == 0 {
		return nil
	}
	return &sink.ConfigError{Problems: p.List()}
}

func oneOf(p *fields.Problems, path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.Addf(path, "must be one of %s (got %q)", strings.Join(allowed, ", "), v)
}

func (e Encryption) validate(p *fields.Problems) {
	const path = "encryption"
	alg := seal.NormalizeAlgorithm(e.Algorithm)
	oneOf(p, path+".algorithm", alg, seal.AES256GCM, seal.AES256CCM)
	switch n := utf8.RuneCountInString(e.KeyID); {
	case strings.TrimSpace(e.KeyID) == "":
		p.Add(path+".key_id", "must not be empty")
	case n > 128:
		p.Addf(path+".key_id", "must be at most 128 characters")
	}
	checkKeySources(p, path, e.KeyB64, e.KeyB64Env, e.KeyB64File)
	switch {
	case e.NonceSizeBytes < 7 || e.NonceSizeBytes > 13:
		p.Addf(path+".nonce_size_bytes", "must be between 7 and 13 (got %d)", e.NonceSizeBytes)
	case alg == seal.AES256GCM && e.NonceSizeBytes < 8:
		p.Addf(path+".nonce_size_bytes", "must be between 8 and 13 for aes-256-gcm (got %d)", e.NonceSizeBytes)
	}
	if e.TagLength < 4 || e.TagLength > 16 || e.TagLength%2 != 0 {
		p.Addf(path+".tag_length", "must be one of 4, 6, 8, 10, 12, 14, 16 (got %d)", e.TagLength)
	}
	if e.Enabled && e.KeyB64 == nil && e.KeyB64Env == nil && e.KeyB64File == nil {
		p.Add(path, "key_b64_env or key_b64 is required because sink.encryption.enabled is true")
	}
	for i, r := range e.Rules {
		checkKeySources(p, fields.Index(path+".rules", i), r.KeyB64, r.KeyB64Env, r.KeyB64File)
	}
}

// envVarName is the top-level encryption section's rule: any non-blank
// name without whitespace, '=' or controls.
var envVarName = regexp.MustCompile(`^[^\s=\x00-\x1f]+$`)

// checkKeySources checks that a key has at most one source and that direct
// key material is an AES-256 key; the material is never echoed.
func checkKeySources(p *fields.Problems, path string, value *secret.Value, env, file *string) {
	n := 0
	for _, set := range []bool{value != nil, env != nil, file != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		p.Add(path+".key_b64", "set only one of key_b64, key_b64_env, key_b64_file")
	}
	if value != nil {
		if _, err := seal.ParseKey(value.Reveal()); err != nil {
			p.Add(path+".key_b64", err.Error())
		}
	}
	if env != nil && *env != "" && !envVarName.MatchString(*env) {
		p.Addf(path+".key_b64_env", "must be an environment variable name (got %q)", *env)
	}
}

// Warnings returns the load warnings of the configuration, with paths
// relative to the sink object: plaintext records, and encryption rules the
// spool sink ignores.
func (c Config) Warnings() []sink.Problem {
	var w []sink.Problem
	if !c.Encryption.Enabled {
		w = append(w, sink.Problem{Path: "allow_unencrypted", Message: "spool records are written unencrypted"})
	}
	if len(c.Encryption.Rules) > 0 {
		w = append(w, sink.Problem{Path: "encryption.rules", Message: "ignored by the spool sink (records use the section's own key)"})
	}
	return w
}

// ResolvedDirectory returns the directory with a leading ~ or ~user
// expanded and made absolute, without touching it.
func (c Config) ResolvedDirectory() (string, error) {
	dir := c.Directory
	if strings.HasPrefix(dir, "~") {
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
		dir = filepath.Join(home, rest)
	}
	return filepath.Abs(dir)
}

var _ sink.Warner = Config{}
