// Package s3sink is the S3 sink (docs/s3.md, docs/formats.md#s3-objects): one
// object per message (plus an optional metadata sidecar) in one bucket of
// Amazon S3 or an S3-compatible store, written with the AWS SDK for Go v2.
// A message is Committed only after PutObject returned success.
//
// The duplicate model is deterministic object keys plus a conditional PUT
// (If-None-Match: *): a redelivered message maps to the same key, the store
// answers 412 and the sink reports Duplicate without rewriting the object.
// A store that answers the conditional PUT with 501 NotImplemented switches
// the sink to HEAD-then-PUT for the rest of the process (safe for one writer
// per key, racy across processes); existence_check "head" [ext] selects that
// mode from the start, for stores that silently ignore If-None-Match.
//
// The directory is sinks/s3; the package is named s3sink so that it does not
// clash with the SDK's s3 package in the files that use both.
package s3sink

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/s3conn"
	"github.com/nats-sinks/nats-sink/sink"
)

// Config is the s3 sink's configuration (docs/s3.md). Default returns it
// with every default; Decode fills it from a "sink" object.
type Config struct {
	Type                     string            `json:"type" trim:"true" lower:"true" enum:"s3" doc:"Sink type."`
	Bucket                   string            `json:"bucket" required:"true" pattern:"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$" doc:"Bucket name: 3-63 characters of a-z, 0-9, '.', '-'; no '..', '.-', '-.'; not an IP address."`
	Prefix                   *string           `json:"prefix" blanknull:"true" maxlen:"1024" doc:"Key prefix of '/'-separated segments (each ^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$, not '.' or '..'), without leading or trailing '/'. Blank or null means none."`
	EndpointURL              *string           `json:"endpoint_url" blanknull:"true" doc:"S3-compatible endpoint http(s)://host[:port] (no credentials, path, query or fragment); path-style addressing is used with it. null means AWS's regional endpoint."`
	AllowHTTPForLocalTesting bool              `json:"allow_http_for_local_testing" doc:"Allow an http endpoint_url whose host is localhost, 127.0.0.1 or ::1."`
	RegionName               *string           `json:"region_name" blanknull:"true" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" doc:"AWS region; null means the SDK's resolution (AWS_REGION, profile), else us-east-1."`
	CredentialMode           string            `json:"credential_mode" enum:"default_chain,environment,profile" doc:"default_chain: the SDK's default credential chain; environment: keys from the variables named by aws_*_env; profile: the shared-config profile profile_name."`
	ProfileName              *string           `json:"profile_name" pattern:"^[A-Za-z][A-Za-z0-9_.:-]{0,127}$" doc:"Shared-config profile; only with credential_mode profile, where it is required."`
	AWSAccessKeyIDEnv        *string           `json:"aws_access_key_id_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the access key id; credential_mode environment only (required there)."`
	AWSSecretAccessKeyEnv    *string           `json:"aws_secret_access_key_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding the secret access key; credential_mode environment only (required there)."`
	AWSSessionTokenEnv       *string           `json:"aws_session_token_env" pattern:"^[A-Z_][A-Z0-9_]{0,127}$" doc:"Environment variable holding a session token; credential_mode environment only."`
	KeyStrategy              string            `json:"key_strategy" enum:"idempotency_key,stream_sequence,message_id,payload_sha256" doc:"What the object key is derived from (docs/formats.md#s3-objects)."`
	KeyPrefix                *string           `json:"key_prefix" blanknull:"true" pattern:"^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$" doc:"Written as '<key_prefix>:' before the strategy's key."`
	ObjectSuffix             string            `json:"object_suffix" pattern:"^\\.[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$" doc:"Suffix of every object key."`
	DuplicatePolicy          string            `json:"duplicate_policy" enum:"skip_existing,replace,fail_existing" doc:"An existing key is a duplicate (skip_existing), is overwritten (replace), or dead-letters the message (fail_existing)."`
	ObjectFormat             string            `json:"object_format" enum:"envelope,payload" doc:"Object body: the nats_sinks.s3.object.v1 envelope, or the normalised payload alone."`
	MetadataMode             string            `json:"metadata_mode" enum:"none,object_metadata,sidecar" doc:"none: no user metadata; object_metadata: x-amz-meta-* headers; sidecar: those plus a nats_sinks.s3.sidecar.v1 object beside each object."`
	SidecarSuffix            string            `json:"sidecar_suffix" pattern:"^\\.[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$" doc:"Replaces object_suffix in the sidecar's key; must differ from object_suffix."`
	PayloadMode              string            `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope" doc:"How the payload is normalised (docs/formats.md#payload-normalisation)."`
	Compression              string            `json:"compression" enum:"none,gzip" doc:"gzip compresses the primary object (Content-Encoding: gzip); object_suffix must then not be .json."`
	ContentType              string            `json:"content_type" enum:"application/json" doc:"Content-Type of every object."`
	ObjectMetadata           map[string]string `json:"object_metadata" maxitems:"32" nopad:"true" nocontrol:"true" maxlen:"256" doc:"Extra user metadata (at most 32): names ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$, unique ignoring case; values at most 256 characters."`
	ServerSideEncryption     string            `json:"server_side_encryption" enum:"none,AES256" doc:"Server-side encryption requested for every object."`
	MaxKeyBytes              int               `json:"max_key_bytes" min:"64" max:"1024" doc:"Longest object key in UTF-8 bytes; a longer key dead-letters the message."`
	MaxObjectBytes           int               `json:"max_object_bytes" min:"1" max:"1073741824" doc:"Largest object body, checked before and after compression; a larger one dead-letters the message."`
	MaxMetadataBytes         int               `json:"max_metadata_bytes" min:"128" max:"65536" doc:"Largest sum of UTF-8 bytes of user-metadata names and values."`
	RequestTimeoutSeconds    float64           `json:"request_timeout_seconds" xmin:"0" max:"300" doc:"Timeout of one request attempt."`
	MaxRetries               int               `json:"max_retries" min:"0" max:"10" doc:"Retries of a temporary failure inside one write, after the first attempt."`
	RetryBackoffMS           int               `json:"retry_backoff_ms" min:"0" max:"60000" doc:"Base retry delay in milliseconds."`
	RetryMaxBackoffMS        int               `json:"retry_max_backoff_ms" min:"0" max:"300000" doc:"Largest retry delay in milliseconds; at least retry_backoff_ms."`
	RetryBackoffMode         string            `json:"retry_backoff_mode" enum:"fixed,linear,exponential" doc:"How the retry delay grows with the attempt."`
	RetryBackoffMultiplier   float64           `json:"retry_backoff_multiplier" min:"1" max:"10" doc:"Growth factor of exponential mode."`
	RetryJitter              string            `json:"retry_jitter" enum:"none,full,equal" doc:"Random spread of the retry delay."`
	Durability               string            `json:"durability" enum:"operator_confirmed" doc:"The store's own durability is what the sink relies on."`
	Concurrency              int               `json:"concurrency" min:"1" max:"256" doc:"[ext] Messages of one batch written at once; 1 writes in order and stops at the first temporary failure."`
	ExistenceCheck           string            `json:"existence_check" enum:"conditional_put,head" doc:"[ext] How skip_existing and fail_existing detect an existing key: conditional_put (If-None-Match: *, switching to head when the store answers 501) or head (HEAD then PUT; one writer per key)."`
}

var _ fields.Validator = (*Config)(nil)

// Default returns the configuration with every default of docs/s3.md.
func Default() Config {
	return Config{
		Type:                   "s3",
		CredentialMode:         "default_chain",
		KeyStrategy:            "idempotency_key",
		ObjectSuffix:           ".json",
		DuplicatePolicy:        "skip_existing",
		ObjectFormat:           "envelope",
		MetadataMode:           "object_metadata",
		SidecarSuffix:          ".metadata.json",
		PayloadMode:            string(record.JSONOrEnvelope),
		Compression:            "none",
		ContentType:            "application/json",
		ObjectMetadata:         map[string]string{},
		ServerSideEncryption:   "none",
		MaxKeyBytes:            1024,
		MaxObjectBytes:         16777216,
		MaxMetadataBytes:       4096,
		RequestTimeoutSeconds:  10,
		MaxRetries:             0,
		RetryBackoffMS:         250,
		RetryMaxBackoffMS:      5000,
		RetryBackoffMode:       "exponential",
		RetryBackoffMultiplier: 2,
		RetryJitter:            "full",
		Durability:             "operator_confirmed",
		Concurrency:            1,
		ExistenceCheck:         "conditional_put",
	}
}

// Decode validates one s3 "sink" object without I/O and returns its Config.
// Problems come back as one *sink.ConfigError with paths relative to the
// sink object ("bucket: required"). Environment variables are read by Open.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules they cannot express. Problems have paths relative to the sink
// object and come back as one *sink.ConfigError, or nil. Decode calls it on
// the decoded object, New before anything else, so a Config built in Go is
// checked like a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var (
	metaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// secretMetadata are names that look like credentials; object metadata is
// readable by anyone who may read the object.
var secretMetadata = []string{"authorization", "cookie", "x-api-key", "x-auth-token"}

// Names of the user metadata the sink writes itself (docs/formats.md#s3-objects).
const (
	metaSchema        = "nats-sinks-schema"
	metaSchemaVersion = "nats-sinks-schema-version"
	metaKeyStrategy   = "nats-sinks-key-strategy"
	metaMessageIDHash = "nats-sinks-message-id-sha256"
	// metaIdentityHash is the hex SHA-256 of the message's identity under
	// the key strategy (record.Identity): how a later write that finds
	// the key taken tells its own earlier write from another message's.
	metaIdentityHash = "nats-sinks-idempotency-key-sha256"
)

// rules checks what the struct tags cannot express: bucket names S3
// rejects, the prefix's segments, the endpoint URL, the keys of each
// credential mode, the sidecar and compression rules, object metadata
// names and size, and the retry delays.
func (c *Config) rules(p *fields.Problems) {
	add := func(path, format string, args ...any) { p.Addf(path, format, args...) }
	if msg := checkBucket(c.Bucket); msg != "" {
		add("bucket", "%s", msg)
	}
	if c.Prefix != nil {
		if msg := checkPrefix(*c.Prefix); msg != "" {
			add("prefix", "%s", msg)
		}
	}
	if c.EndpointURL != nil {
		if msg := c.checkEndpoint(*c.EndpointURL); msg != "" {
			add("endpoint_url", "%s", msg)
		}
	}
	c.credentialProblems(add)
	if c.MetadataMode == "sidecar" {
		if c.DuplicatePolicy == "fail_existing" {
			// A crash between the object and its sidecar would leave the
			// redelivery to fail on the object it wrote itself.
			add("metadata_mode", "sidecar cannot be used with duplicate_policy fail_existing")
		}
		if c.SidecarSuffix == c.ObjectSuffix {
			add("sidecar_suffix", "must differ from object_suffix (both %q)", c.ObjectSuffix)
		}
	}
	if c.Compression == "gzip" && c.ObjectSuffix == ".json" {
		add("compression", "gzip needs an object_suffix other than .json (such as .json.gz)")
	}
	c.metadataProblems(add)
	if c.RetryMaxBackoffMS < c.RetryBackoffMS {
		add("retry_max_backoff_ms", "must be at least retry_backoff_ms (%d) (got %d)", c.RetryBackoffMS, c.RetryMaxBackoffMS)
	}
}

type addFunc func(path, format string, args ...any)

// checkPrefix returns the problem with the key prefix, or "".
func checkPrefix(p string) string { return s3conn.CheckPrefix(p) }

// checkBucket returns the problem with a bucket name the pattern tag lets
// through, or "".
func checkBucket(b string) string { return s3conn.CheckBucket(b) }

// checkEndpoint returns the problem with endpoint_url, or "".
func (c *Config) checkEndpoint(raw string) string {
	return s3conn.CheckEndpoint(raw, c.AllowHTTPForLocalTesting)
}

// settings returns the connection keys.
func (c *Config) settings() s3conn.Settings {
	return s3conn.Settings{
		Name:                     "s3 sink",
		EndpointURL:              c.EndpointURL,
		AllowHTTPForLocalTesting: c.AllowHTTPForLocalTesting,
		RegionName:               c.RegionName,
		CredentialMode:           c.CredentialMode,
		ProfileName:              c.ProfileName,
		AccessKeyIDEnv:           c.AWSAccessKeyIDEnv,
		SecretAccessKeyEnv:       c.AWSSecretAccessKeyEnv,
		SessionTokenEnv:          c.AWSSessionTokenEnv,
		MaxIdleConnsPerHost:      max(c.Concurrency, 2) * 8,
	}
}

// credentialProblems checks credential_mode and the keys that belong to
// each mode.
func (c *Config) credentialProblems(add addFunc) {
	st := c.settings()
	st.CredentialProblems(s3conn.AddFunc(add))
}

// metadataProblems checks object_metadata's names and the total size of the
// user metadata the sink will write.
func (c *Config) metadataProblems(add addFunc) {
	names := make([]string, 0, len(c.ObjectMetadata))
	for name := range c.ObjectMetadata {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]string{}
	for _, name := range names {
		path := fields.Join("object_metadata", name)
		lower := strings.ToLower(name)
		switch {
		case !metaName.MatchString(name):
			add(path, "name must match %s", metaName)
		case slices.Contains(secretMetadata, lower):
			add(path, "name %q is reserved for credentials, which must not be stored as object metadata", name)
		case lower == metaSchema || lower == metaSchemaVersion || lower == metaKeyStrategy || lower == metaMessageIDHash || lower == metaIdentityHash:
			// The spec is silent; letting the operator overwrite the
			// sink's own entries would make objects misdescribe themselves.
			add(path, "name %q is written by the sink itself", name)
		}
		if prev, dup := seen[lower]; dup {
			add(path, "duplicates %s (metadata names are case-insensitive)", prev)
		}
		seen[lower] = path
	}
	if c.MetadataMode == "none" {
		return
	}
	// The largest metadata any object gets is known now: reject it here
	// rather than dead-letter every message that carries a message id.
	if n := c.maxMetadataSize(); n > c.MaxMetadataBytes {
		add("object_metadata", "user metadata of up to %d bytes exceeds max_metadata_bytes (%d)", n, c.MaxMetadataBytes)
	}
}

// maxMetadataSize returns the largest sum of UTF-8 name and value bytes of
// the user metadata of a primary object or sidecar.
func (c *Config) maxMetadataSize() int {
	operator := 0
	for k, v := range c.ObjectMetadata {
		operator += len(k) + len(v)
	}
	common := len(metaSchemaVersion) + 1 + len(metaKeyStrategy) + len(c.KeyStrategy) + operator
	primary := common + len(metaSchema) + len(ObjectSchema) + len(metaMessageIDHash) + 64 + len(metaIdentityHash) + 64
	sidecar := common + len(metaSchema) + len(SidecarSchema)
	return max(primary, sidecar)
}
