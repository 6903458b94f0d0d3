// Package broker holds the rules the message-broker sinks (redis, rabbitmq,
// mqtt) share: the record keys every one of them accepts (record_format,
// payload_mode, include_metadata, key_strategy, forward_headers,
// max_record_bytes, publish_timeout_ms), credentials and TLS, destination
// templates, and how one message becomes a record — its body, its idempotency
// key and the metadata set every broker record carries (subject, stream,
// sequence, key, priority, classification, labels, trace context).
//
// Each sink embeds Options, Auth and TLS in its Config, so the keys sit in
// the sink object itself ("record_format", "tls.ca_file") and the three
// sinks cannot drift apart. The package imports only package sink and leaf
// helpers.
package broker

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Options are the record keys every broker sink has. A sink embeds it in its
// Config and starts it from DefaultOptions. max_record_bytes, whose upper
// bound differs per sink, is each sink's own key (DefaultMaxRecordBytes).
type Options struct {
	RecordFormat     string             `json:"record_format" enum:"envelope,payload,raw" doc:"Record body: the nats_sinks.<type>.message.v1 envelope, the normalised payload alone, or the delivered bytes unchanged."`
	PayloadMode      record.PayloadMode `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope and payload formats."`
	IncludeMetadata  bool               `json:"include_metadata" doc:"Add the standard metadata document to the envelope body."`
	KeyStrategy      string             `json:"key_strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the record's idempotency key is derived from; a message without that material is dead-lettered (ValidationError)."`
	ForwardHeaders   bool               `json:"forward_headers" doc:"Copy the message's normalised NATS headers onto the record (trace headers and the sink's own names excepted)."`
	PublishTimeoutMS int                `json:"publish_timeout_ms" min:"100" max:"600000" doc:"How long a record waits for the broker's confirmation before it is a temporary failure (outcome unknown)."`

	// Names are the header names the metadata set gives priority,
	// classification and labels: the message_metadata header names of the
	// configuration. An empty name means its default.
	Names MetadataNames `json:"-"`
}

// MetadataNames are the names of the priority, classification and labels
// entries of the metadata set.
type MetadataNames struct {
	Priority, Classification, Labels string
}

// DefaultMetadataNames are the default message_metadata header names.
var DefaultMetadataNames = MetadataNames{
	Priority:       "Nats-Sinks-Priority",
	Classification: "Nats-Sinks-Classification",
	Labels:         "Nats-Sinks-Labels",
}

// DefaultMaxRecordBytes is every broker sink's default max_record_bytes.
const DefaultMaxRecordBytes = 1048576

// DefaultOptions returns the shared defaults with the sink's own default
// record format ("envelope" for redis and rabbitmq, "raw" for mqtt).
func DefaultOptions(recordFormat string) Options {
	return Options{
		RecordFormat:     recordFormat,
		PayloadMode:      record.JSONOrEnvelope,
		IncludeMetadata:  true,
		KeyStrategy:      "idempotency_key",
		ForwardHeaders:   true,
		PublishTimeoutMS: 10000,
		Names:            DefaultMetadataNames,
	}
}

// PublishTimeout returns publish_timeout_ms as a duration.
func (o *Options) PublishTimeout() time.Duration {
	return time.Duration(o.PublishTimeoutMS) * time.Millisecond
}

// Problems returns the rule violations of o. The struct tags report them
// when decoding; this repeats them for Configs built by hand.
func (o *Options) Problems() []sink.Problem {
	var ps problems
	ps.enum("record_format", o.RecordFormat, "envelope", "payload", "raw")
	ps.enum("payload_mode", string(o.PayloadMode), "json_or_envelope", "json_only", "text_envelope", "bytes_envelope")
	ps.enum("key_strategy", o.KeyStrategy, "idempotency_key", "stream_sequence", "message_id", "payload_sha256")
	ps.rangeInt("publish_timeout_ms", o.PublishTimeoutMS, 100, 600000)
	return ps
}

// Auth is the credentials block of a broker sink: a user name and at most
// one password source.
type Auth struct {
	Username     *string `json:"username" nonblank:"true" nocontrol:"true" doc:"User name to authenticate as."`
	Password     *Secret `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; only one of password, password_env, password_file."`
	PasswordEnv  *string `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password, read when the sink starts."`
	PasswordFile *string `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed), read when the sink starts."`
}

var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// HasPassword reports whether a password source is set.
func (a *Auth) HasPassword() bool {
	return a.Password != nil || a.PasswordEnv != nil || a.PasswordFile != nil
}

// Problems returns the credential rule violations: more than one password
// source, and with userNeedsPassword a username without any.
func (a *Auth) Problems(userNeedsPassword bool) []sink.Problem {
	var ps problems
	n := 0
	for _, set := range []bool{a.Password != nil, a.PasswordEnv != nil, a.PasswordFile != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		ps.add("password", "set only one of password, password_env, password_file")
	}
	if a.Username != nil && strings.TrimSpace(*a.Username) == "" {
		ps.add("username", "must not be empty")
	}
	if userNeedsPassword && a.Username != nil && n == 0 {
		ps.add("username", "requires one of password, password_env, password_file")
	}
	if a.PasswordEnv != nil && !envName.MatchString(*a.PasswordEnv) {
		ps.add("password_env", "must match "+envName.String())
	}
	return ps
}

// ResolvePassword reads the configured password source: the value itself,
// the environment variable (through lookup), or the file with one trailing
// newline removed. ok is false when no source is set. A variable that is not
// set or a file that cannot be read is a *sink.ConfigError naming the key
// (the CLI exits 2); the error never carries the secret.
func (a *Auth) ResolvePassword(lookup func(string) (string, bool)) (pw string, ok bool, err error) {
	switch {
	case a.Password != nil:
		return a.Password.Reveal(), true, nil
	case a.PasswordEnv != nil:
		v, found := lookup(*a.PasswordEnv)
		if !found {
			return "", false, ConfigError("password_env", fmt.Sprintf("environment variable %s is not set", *a.PasswordEnv))
		}
		if v == "" {
			return "", false, ConfigError("password_env", fmt.Sprintf("environment variable %s is empty", *a.PasswordEnv))
		}
		return v, true, nil
	case a.PasswordFile != nil:
		data, err := os.ReadFile(*a.PasswordFile)
		if err != nil {
			// The os error names the path and the operation, never content.
			return "", false, ConfigError("password_file", fmt.Sprintf("cannot read secret file: %v", err))
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if v == "" {
			return "", false, ConfigError("password_file", fmt.Sprintf("secret file %s is empty", *a.PasswordFile))
		}
		return v, true, nil
	}
	return "", false, nil
}

// User returns the username, or "".
func (a *Auth) User() string {
	if a.Username == nil {
		return ""
	}
	return *a.Username
}

// Secret holds a password. It prints as a mask; Reveal is the one way out.
type Secret string

const mask = "********"

// String returns the mask.
func (Secret) String() string { return mask }

// GoString returns the mask, so %#v does not leak either.
func (Secret) GoString() string { return mask }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// ConfigError is one configuration problem at path (relative to the sink
// object) found when the sink starts; the CLI exits 2 for it.
func ConfigError(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}

// Err returns ps as a *sink.ConfigError, or nil when there are none.
func Err(ps []sink.Problem) error {
	if len(ps) == 0 {
		return nil
	}
	return &sink.ConfigError{Problems: ps}
}

// problems collects configuration problems in the order they are found.
type problems []sink.Problem

func (p *problems) add(path, msg string) { *p = append(*p, sink.Problem{Path: path, Message: msg}) }

func (p *problems) enum(path, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	p.add(path, fmt.Sprintf("must be one of %s (got %q)", strings.Join(allowed, ", "), got))
}

func (p *problems) rangeInt(path string, got, lo, hi int) {
	if got < lo || got > hi {
		p.add(path, fmt.Sprintf("must be between %d and %d (got %d)", lo, hi, got))
	}
}

// Checker collects a sink's own configuration problems with the same
// messages as the shared ones.
type Checker struct{ ps problems }

// Add records a problem at path.
func (c *Checker) Add(path, msg string) { c.ps.add(path, msg) }

// Addf records a problem at path with a formatted message.
func (c *Checker) Addf(path, format string, args ...any) {
	c.ps.add(path, fmt.Sprintf(format, args...))
}

// Enum checks that got is one of allowed.
func (c *Checker) Enum(path, got string, allowed ...string) { c.ps.enum(path, got, allowed...) }

// Range checks lo <= got <= hi.
func (c *Checker) Range(path string, got, lo, hi int) { c.ps.rangeInt(path, got, lo, hi) }

// Append adds problems found elsewhere, prefixing each path with prefix
// ("" for none).
func (c *Checker) Append(prefix string, ps []sink.Problem) {
	for _, p := range ps {
		if prefix != "" {
			p.Path = prefix + "." + p.Path
		}
		c.ps = append(c.ps, p)
	}
}

// Err returns the problems as a *sink.ConfigError, or nil.
func (c *Checker) Err() error { return Err(c.ps) }

// Opener is the shape of sink.Opener that takes the host's dependencies.
// The broker sinks' Decode functions return it until package sink's own
// Opener has that shape; then they return sink.Opener.
type Opener interface {
	Open(ctx context.Context, deps sink.Deps) (sink.Sink, error)
}
