// Package brokerconfig holds the configuration keys the message-broker
// sinks (redis, rabbitmq, mqtt) share: how a message becomes a record
// (record_format, payload_mode, include_metadata, key_strategy,
// forward_headers, publish_timeout_ms), the credentials and the tls object.
// Each broker sink's Config embeds Options and Auth, so the keys decode
// inline in the sink object, and has a TLS field for "tls".
//
// The package holds plain types, their defaults and the rules between
// their keys; the sinks turn them into records, secrets and TLS settings.
// It imports package sink (for the problem type) and package secret only.
package brokerconfig

import (
	"regexp"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Options are the record keys every broker sink has. A sink embeds it in its
// Config and starts it from DefaultOptions. max_record_bytes, whose upper
// bound differs per sink, is each sink's own key (DefaultMaxRecordBytes).
type Options struct {
	RecordFormat     string `json:"record_format" enum:"envelope,payload,raw" doc:"Record body: the nats_sinks.<type>.message.v1 envelope, the normalised payload alone, or the delivered bytes unchanged."`
	PayloadMode      string `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"Payload normalisation for the envelope and payload formats."`
	IncludeMetadata  bool   `json:"include_metadata" doc:"Add the standard metadata document to the envelope body."`
	KeyStrategy      string `json:"key_strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the record's idempotency key is derived from; a message without that material is dead-lettered (ValidationError)."`
	ForwardHeaders   bool   `json:"forward_headers" doc:"Copy the message's normalised NATS headers onto the record (trace headers and the sink's own names excepted)."`
	PublishTimeoutMS int    `json:"publish_timeout_ms" min:"100" max:"600000" doc:"How long a record waits for the broker's confirmation before it is a temporary failure (outcome unknown)."`

	// Names are the header names the metadata set gives priority,
	// classification and labels: the configuration's message_metadata
	// header names. An empty name means its default.
	Names MetadataNames `json:"-"`
}

// MetadataNames are the names of the priority, classification and labels
// entries of a record's metadata set.
type MetadataNames struct {
	Priority, Classification, Labels string
}

// DefaultMetadataNames are the default message_metadata header names.
func DefaultMetadataNames() MetadataNames {
	return MetadataNames{
		Priority:       "Nats-Sinks-Priority",
		Classification: "Nats-Sinks-Classification",
		Labels:         "Nats-Sinks-Labels",
	}
}

// DefaultMaxRecordBytes is every broker sink's default max_record_bytes.
const DefaultMaxRecordBytes = 1048576

// DefaultOptions returns the shared defaults with the sink's own default
// record format ("envelope" for redis and rabbitmq, "raw" for mqtt).
func DefaultOptions(recordFormat string) Options {
	return Options{
		RecordFormat:     recordFormat,
		PayloadMode:      "json_or_envelope",
		IncludeMetadata:  true,
		KeyStrategy:      "idempotency_key",
		ForwardHeaders:   true,
		PublishTimeoutMS: 10000,
		Names:            DefaultMetadataNames(),
	}
}

// PublishTimeout returns publish_timeout_ms as a duration.
func (o *Options) PublishTimeout() time.Duration {
	return time.Duration(o.PublishTimeoutMS) * time.Millisecond
}

// Auth is the credentials block of a broker sink: a user name and at most
// one password source, read when the sink starts.
type Auth struct {
	Username     *string       `json:"username" nonblank:"true" nocontrol:"true" doc:"User name to authenticate as."`
	Password     *secret.Value `json:"password" secret:"true" nonblank:"true" nocontrol:"true" doc:"Password; only one of password, password_env, password_file."`
	PasswordEnv  *string       `json:"password_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the password, read when the sink starts."`
	PasswordFile *string       `json:"password_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"File holding the password (one trailing newline removed), read when the sink starts."`
}

var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// HasPassword reports whether a password source is set.
func (a *Auth) HasPassword() bool {
	return a.Password != nil || a.PasswordEnv != nil || a.PasswordFile != nil
}

// User returns the username, or "".
func (a *Auth) User() string {
	if a.Username == nil {
		return ""
	}
	return *a.Username
}

// Rules returns the problems between the credential keys: more than one
// password source, and, with userNeedsPassword, a username without any.
// Paths are relative to the sink object.
func (a *Auth) Rules(userNeedsPassword bool) []sink.Problem {
	var ps []sink.Problem
	add := func(path, msg string) { ps = append(ps, sink.Problem{Path: path, Message: msg}) }
	n := 0
	for _, set := range []bool{a.Password != nil, a.PasswordEnv != nil, a.PasswordFile != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		add("password", "set only one of password, password_env, password_file")
	}
	if a.Username != nil && strings.TrimSpace(*a.Username) == "" {
		add("username", "must not be empty")
	}
	if userNeedsPassword && a.Username != nil && n == 0 {
		add("username", "requires one of password, password_env, password_file")
	}
	if a.PasswordEnv != nil && !envName.MatchString(*a.PasswordEnv) {
		// The pattern tag reports this while decoding; this covers Go-built
		// values checked by Rules alone.
		add("password_env", "must match "+envName.String())
	}
	return ps
}

// TLS is the "tls" object of a broker sink. The files are read when the sink
// starts.
type TLS struct {
	Enabled            bool    `json:"enabled" doc:"Connect with TLS."`
	CAFile             *string `json:"ca_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"PEM CA bundle; when set only these CAs are trusted, else the system roots."`
	CertFile           *string `json:"cert_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client certificate (mutual TLS); requires key_file."`
	KeyFile            *string `json:"key_file" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Client key (mutual TLS); requires cert_file."`
	InsecureSkipVerify bool    `json:"insecure_skip_verify" doc:"Disable certificate and host-name verification (lab use only)."`
}

// Rules returns the problems between the tls keys, with paths under "tls".
// on reports whether TLS is used at all (tls.enabled, or a TLS URL scheme
// such as amqps): files or a verification switch without TLS would
// silently do nothing, so they are errors.
func (t *TLS) Rules(on bool) []sink.Problem {
	var ps []sink.Problem
	add := func(path, msg string) { ps = append(ps, sink.Problem{Path: path, Message: msg}) }
	if !on {
		for _, f := range []struct {
			key string
			set bool
		}{{"ca_file", t.CAFile != nil}, {"cert_file", t.CertFile != nil}, {"key_file", t.KeyFile != nil}, {"insecure_skip_verify", t.InsecureSkipVerify}} {
			if f.set {
				add("tls."+f.key, "requires tls.enabled")
			}
		}
	}
	if t.CertFile != nil && t.KeyFile == nil {
		add("tls.cert_file", "requires tls.key_file")
	}
	if t.KeyFile != nil && t.CertFile == nil {
		add("tls.key_file", "requires tls.cert_file")
	}
	return ps
}
