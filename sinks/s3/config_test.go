package s3sink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, err error) []sink.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *sink.ConfigError", err, err)
	}
	return ce.Problems
}

func TestDecodeDefaults(t *testing.T) {
	op, err := Decode([]byte(`{"type":"s3","bucket":"nats-archive"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := Default()
	want.Bucket = "nats-archive"
	if diff := cmp.Diff(want, op.(Config)); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
	// Spot-check the spec's defaults (docs/s3.md) rather than trusting
	// Default against itself.
	d := Default()
	if d.KeyStrategy != "idempotency_key" || d.ObjectSuffix != ".json" || d.DuplicatePolicy != "skip_existing" ||
		d.MetadataMode != "object_metadata" || d.SidecarSuffix != ".metadata.json" || d.MaxObjectBytes != 16777216 ||
		d.MaxMetadataBytes != 4096 || d.MaxKeyBytes != 1024 || d.RequestTimeoutSeconds != 10 || d.RetryBackoffMS != 250 ||
		d.RetryMaxBackoffMS != 5000 || d.CredentialMode != "default_chain" || d.Concurrency != 1 {
		t.Errorf("Default() = %+v differs from docs/s3.md", d)
	}
}

func TestDecodeFull(t *testing.T) {
	op, err := Decode([]byte(`{"type":"s3","bucket":"my.bucket-1","prefix":"nats/orders","endpoint_url":"http://127.0.0.1:9000",
		"allow_http_for_local_testing":true,"region_name":"eu-west-1","credential_mode":"environment",
		"aws_access_key_id_env":"S3_KEY","aws_secret_access_key_env":"S3_SECRET","aws_session_token_env":"S3_TOKEN",
		"key_strategy":"stream_sequence","key_prefix":"prod","object_suffix":".json.gz","duplicate_policy":"replace",
		"object_format":"payload","metadata_mode":"sidecar","sidecar_suffix":".meta.json","payload_mode":"json_only",
		"compression":"gzip","content_type":"application/json","object_metadata":{"team":"billing"},
		"server_side_encryption":"AES256","max_key_bytes":512,"max_object_bytes":1024,"max_metadata_bytes":400,
		"request_timeout_seconds":2.5,"max_retries":3,"retry_backoff_ms":100,"retry_max_backoff_ms":1000,
		"retry_backoff_mode":"linear","retry_backoff_multiplier":1.5,"retry_jitter":"none","durability":"operator_confirmed",
		"concurrency":16,"existence_check":"head"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	c := op.(Config)
	if *c.Prefix != "nats/orders" || *c.AWSSessionTokenEnv != "S3_TOKEN" || c.Concurrency != 16 || c.RequestTimeoutSeconds != 2.5 ||
		c.ExistenceCheck != "head" || c.ObjectMetadata["team"] != "billing" || c.RetryBackoffMultiplier != 1.5 {
		t.Errorf("Decode = %+v", c)
	}
}

func TestDecodeBlankMeansNull(t *testing.T) {
	op, err := Decode([]byte(`{"type":"s3","bucket":"abc","prefix":"","key_prefix":" ","endpoint_url":null,"region_name":""}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	c := op.(Config)
	if c.Prefix != nil || c.KeyPrefix != nil || c.EndpointURL != nil || c.RegionName != nil {
		t.Errorf("blank values = %v %v %v %v, want nil", c.Prefix, c.KeyPrefix, c.EndpointURL, c.RegionName)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []sink.Problem
	}{
		{"bucket required", `{"type":"s3"}`, []sink.Problem{{Path: "bucket", Message: "required"}}},
		{"unknown key", `{"type":"s3","bucket":"abc","buckt":"x"}`,
			[]sink.Problem{{Path: "buckt", Message: `unknown key (did you mean "bucket")`}}},
		{"per-key rules, schema order", `{"type":"s3","bucket":"AB","prefix":7,"region_name":"-x",
			"credential_mode":"keys","profile_name":"1p","aws_access_key_id_env":"lower",
			"key_strategy":"uuid","key_prefix":"a b","object_suffix":"json","duplicate_policy":"overwrite",
			"object_format":"xml","metadata_mode":"tags","sidecar_suffix":".","payload_mode":"raw",
			"compression":"zstd","content_type":"text/plain","object_metadata":{"a":" v"},
			"server_side_encryption":"aws:kms","max_key_bytes":63,"max_object_bytes":0,"max_metadata_bytes":127,
			"request_timeout_seconds":0,"max_retries":11,"retry_backoff_ms":-1,"retry_max_backoff_ms":300001,
			"retry_backoff_mode":"random","retry_backoff_multiplier":0.5,"retry_jitter":"some",
			"durability":"fsync","concurrency":0,"existence_check":"list"}`,
			[]sink.Problem{
				{Path: "bucket", Message: `must match ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ (got "AB")`},
				{Path: "prefix", Message: "expected string (got number)"},
				{Path: "region_name", Message: `must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ (got "-x")`},
				{Path: "credential_mode", Message: `must be one of default_chain, environment, profile (got "keys")`},
				{Path: "profile_name", Message: `must match ^[A-Za-z][A-Za-z0-9_.:-]{0,127}$ (got "1p")`},
				{Path: "aws_access_key_id_env", Message: `must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "lower")`},
				{Path: "key_strategy", Message: `must be one of idempotency_key, stream_sequence, message_id, payload_sha256 (got "uuid")`},
				{Path: "key_prefix", Message: `must match ^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$ (got "a b")`},
				{Path: "object_suffix", Message: `must match ^\.[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$ (got "json")`},
				{Path: "duplicate_policy", Message: `must be one of skip_existing, replace, fail_existing (got "overwrite")`},
				{Path: "object_format", Message: `must be one of envelope, payload (got "xml")`},
				{Path: "metadata_mode", Message: `must be one of none, object_metadata, sidecar (got "tags")`},
				{Path: "sidecar_suffix", Message: `must match ^\.[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$ (got ".")`},
				{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "raw")`},
				{Path: "compression", Message: `must be one of none, gzip (got "zstd")`},
				{Path: "content_type", Message: `must be one of application/json (got "text/plain")`},
				{Path: "object_metadata.a", Message: "must not have surrounding whitespace"},
				{Path: "server_side_encryption", Message: `must be one of none, AES256 (got "aws:kms")`},
				{Path: "max_key_bytes", Message: "must be between 64 and 1024 (got 63)"},
				{Path: "max_object_bytes", Message: "must be between 1 and 1073741824 (got 0)"},
				{Path: "max_metadata_bytes", Message: "must be between 128 and 65536 (got 127)"},
				{Path: "request_timeout_seconds", Message: "must be greater than 0 and at most 300 (got 0)"},
				{Path: "max_retries", Message: "must be between 0 and 10 (got 11)"},
				{Path: "retry_backoff_ms", Message: "must be between 0 and 60000 (got -1)"},
				{Path: "retry_max_backoff_ms", Message: "must be between 0 and 300000 (got 300001)"},
				{Path: "retry_backoff_mode", Message: `must be one of fixed, linear, exponential (got "random")`},
				{Path: "retry_backoff_multiplier", Message: "must be between 1 and 10 (got 0.5)"},
				{Path: "retry_jitter", Message: `must be one of none, full, equal (got "some")`},
				{Path: "durability", Message: `must be one of operator_confirmed (got "fsync")`},
				{Path: "concurrency", Message: "must be between 1 and 256 (got 0)"},
				{Path: "existence_check", Message: `must be one of conditional_put, head (got "list")`},
			}},
		{"bucket rules", `{"type":"s3","bucket":"a..b"}`,
			[]sink.Problem{{Path: "bucket", Message: `must not contain "..", ".-" or "-." (got "a..b")`}}},
		{"bucket dash dot", `{"type":"s3","bucket":"a-.b"}`,
			[]sink.Problem{{Path: "bucket", Message: `must not contain "..", ".-" or "-." (got "a-.b")`}}},
		{"bucket IP", `{"type":"s3","bucket":"192.168.1.10"}`,
			[]sink.Problem{{Path: "bucket", Message: `must not be an IP address (got "192.168.1.10")`}}},
		{"prefix rules", `{"type":"s3","bucket":"abc","prefix":"/a"}`,
			[]sink.Problem{{Path: "prefix", Message: `must not start or end with "/" (got "/a")`}}},
		{"prefix double slash", `{"type":"s3","bucket":"abc","prefix":"a//b"}`,
			[]sink.Problem{{Path: "prefix", Message: `must not contain "//" (got "a//b")`}}},
		{"prefix dot segment", `{"type":"s3","bucket":"abc","prefix":"a/../b"}`,
			[]sink.Problem{{Path: "prefix", Message: `segment ".." is not allowed`}}},
		{"prefix bad segment", `{"type":"s3","bucket":"abc","prefix":"a/b c"}`,
			[]sink.Problem{{Path: "prefix", Message: `segment "b c" must match ^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$`}}},
		{"endpoint http needs the flag", `{"type":"s3","bucket":"abc","endpoint_url":"http://127.0.0.1:9000"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: "must use https (http is allowed only with allow_http_for_local_testing and a loopback host)"}}},
		{"endpoint http not loopback", `{"type":"s3","bucket":"abc","endpoint_url":"http://minio.internal:9000","allow_http_for_local_testing":true}`,
			[]sink.Problem{{Path: "endpoint_url", Message: `http is allowed only for localhost, 127.0.0.1 or ::1 (got host "minio.internal")`}}},
		{"endpoint credentials not echoed", `{"type":"s3","bucket":"abc","endpoint_url":"https://AKID:hunter2@s3.example.com"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: "must not contain credentials; use credential_mode"}}},
		{"endpoint path", `{"type":"s3","bucket":"abc","endpoint_url":"https://s3.example.com/bucket"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: "must not contain a path (path-style addressing adds the bucket)"}}},
		{"endpoint query", `{"type":"s3","bucket":"abc","endpoint_url":"https://s3.example.com?x=1"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: "must not contain a query"}}},
		{"endpoint fragment", `{"type":"s3","bucket":"abc","endpoint_url":"https://s3.example.com#f"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: "must not contain a fragment"}}},
		{"endpoint scheme", `{"type":"s3","bucket":"abc","endpoint_url":"ftp://s3.example.com"}`,
			[]sink.Problem{{Path: "endpoint_url", Message: `must use https (got scheme "ftp")`}}},
		{"environment mode needs its keys", `{"type":"s3","bucket":"abc","credential_mode":"environment","aws_session_token_env":"TOK"}`,
			[]sink.Problem{
				{Path: "aws_access_key_id_env", Message: "required with credential_mode environment"},
				{Path: "aws_secret_access_key_env", Message: "required with credential_mode environment"},
			}},
		{"env keys only with environment", `{"type":"s3","bucket":"abc","aws_access_key_id_env":"K","profile_name":"p"}`,
			[]sink.Problem{
				{Path: "profile_name", Message: "only allowed with credential_mode profile"},
				{Path: "aws_access_key_id_env", Message: "only allowed with credential_mode environment"},
			}},
		{"profile mode needs a profile", `{"type":"s3","bucket":"abc","credential_mode":"profile"}`,
			[]sink.Problem{{Path: "profile_name", Message: "required with credential_mode profile"}}},
		{"sidecar with fail_existing, equal suffixes", `{"type":"s3","bucket":"abc","metadata_mode":"sidecar","duplicate_policy":"fail_existing","sidecar_suffix":".json"}`,
			[]sink.Problem{
				{Path: "metadata_mode", Message: "sidecar cannot be used with duplicate_policy fail_existing"},
				{Path: "sidecar_suffix", Message: `must differ from object_suffix (both ".json")`},
			}},
		{"gzip needs another suffix", `{"type":"s3","bucket":"abc","compression":"gzip"}`,
			[]sink.Problem{{Path: "compression", Message: "gzip needs an object_suffix other than .json (such as .json.gz)"}}},
		{"object metadata names", `{"type":"s3","bucket":"abc","object_metadata":{"Authorization":"x","Team":"a","team":"b","-x":"y","nats-sinks-schema":"z"}}`,
			[]sink.Problem{
				{Path: "object_metadata.-x", Message: "name must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
				{Path: "object_metadata.Authorization", Message: `name "Authorization" is reserved for credentials, which must not be stored as object metadata`},
				{Path: "object_metadata.nats-sinks-schema", Message: `name "nats-sinks-schema" is written by the sink itself`},
				{Path: "object_metadata.team", Message: "duplicates object_metadata.Team (metadata names are case-insensitive)"},
			}},
		{"metadata too large", `{"type":"s3","bucket":"abc","max_metadata_bytes":128,"object_metadata":{"note":"` + strings.Repeat("x", 40) + `"}}`,
			[]sink.Problem{{Path: "object_metadata", Message: "user metadata of up to 337 bytes exceeds max_metadata_bytes (128)"}}},
		{"retry max below base", `{"type":"s3","bucket":"abc","retry_backoff_ms":500,"retry_max_backoff_ms":100}`,
			[]sink.Problem{{Path: "retry_max_backoff_ms", Message: "must be at least retry_backoff_ms (500) (got 100)"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("Decode(%s) problems (-want +got):\n%s", tt.doc, diff)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes a credential: %v", err)
			}
		})
	}
}

// TestMetadataLimitWithoutMetadata checks that the metadata size limit does
// not apply when no metadata is written.
func TestMetadataLimitWithoutMetadata(t *testing.T) {
	doc := `{"type":"s3","bucket":"abc","metadata_mode":"none","max_metadata_bytes":128,"object_metadata":{"note":"` + strings.Repeat("x", 200) + `"}}`
	if _, err := Decode([]byte(doc)); err != nil {
		t.Errorf("Decode: %v", err)
	}
}

func TestOpenEnvironmentCredentials(t *testing.T) {
	c := Default()
	c.Bucket, c.CredentialMode = "abc", "environment"
	c.AWSAccessKeyIDEnv, c.AWSSecretAccessKeyEnv, c.AWSSessionTokenEnv = ptr("K_ID"), ptr("K_SECRET"), ptr("K_TOKEN")
	env := func(name string) (string, bool) {
		switch name {
		case "K_ID":
			return "AKID", true
		case "K_SECRET":
			return " padded-secret ", true
		}
		return "", false
	}
	_, err := New(t.Context(), c, sink.Deps{Env: env})
	want := []sink.Problem{
		{Path: "aws_secret_access_key_env", Message: "environment variable K_SECRET must not have surrounding whitespace"},
		{Path: "aws_session_token_env", Message: "environment variable K_TOKEN is not set"},
	}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("New problems (-want +got):\n%s", diff)
	}
	if strings.Contains(err.Error(), "padded-secret") {
		t.Errorf("error echoes the secret: %v", err)
	}
}

// TestOpenProfile reads a profile from a shared credentials file; a
// missing profile is a configuration error (exit 2). No request is made.
func TestOpenProfile(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[archive]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	c := Default()
	c.Bucket, c.CredentialMode, c.ProfileName = "abc", "profile", ptr("archive")
	s, err := New(t.Context(), c, sink.Deps{})
	if err != nil {
		t.Fatalf("New with profile archive: %v", err)
	}
	got, err := s.client.Options().Credentials.Retrieve(context.Background())
	if err != nil || got.AccessKeyID != "AKIDPROFILE" {
		t.Errorf("credentials = %q, %v; want the profile's key", got.AccessKeyID, err)
	}
	if s.client.Options().Region != "us-east-1" {
		t.Errorf("region = %q, want the us-east-1 fallback", s.client.Options().Region)
	}

	c.ProfileName = ptr("missing")
	_, err = New(t.Context(), c, sink.Deps{})
	if !errors.Is(err, sink.ErrConfig) {
		t.Errorf("New with a missing profile = %v, want a sink.ErrConfig error", err)
	}
	if ce, ok := errors.AsType[*sink.ConfigError](err); !ok || len(ce.Problems) != 1 || ce.Problems[0].Path != "profile_name" {
		t.Errorf("New with a missing profile = %v, want a problem at profile_name", err)
	}
}

// TestEndpointFromConfigOnly checks that the configuration decides the
// endpoint: AWS_ENDPOINT_URL in the environment does not redirect objects.
func TestEndpointFromConfigOnly(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
	st := newStore(t)
	s, _ := open(t, st.config())
	if rs := s.WriteBatch(t.Context(), shapestest.Batch("E", 1)); rs[0].Outcome != sink.Committed {
		t.Errorf("result %+v, want Committed at the configured endpoint", rs[0])
	}
	if got := s.client.Options().UsePathStyle; !got {
		t.Errorf("UsePathStyle = false with a custom endpoint, want true")
	}
	// Without endpoint_url the client resolves AWS's endpoint itself: no
	// base endpoint from the environment, virtual-hosted addressing.
	c := st.config()
	c.EndpointURL = nil
	s2, _ := open(t, c)
	if o := s2.client.Options(); o.BaseEndpoint != nil || o.UsePathStyle {
		t.Errorf("without endpoint_url: BaseEndpoint %v, UsePathStyle %v; want nil, false", deref(o.BaseEndpoint), o.UsePathStyle)
	}
}

func TestSchemaAndEffective(t *testing.T) {
	c := Default()
	s := fields.Schema(&c)
	props, _ := s["properties"].(map[string]any)
	for _, key := range []string{"bucket", "prefix", "credential_mode", "aws_access_key_id_env", "object_metadata",
		"retry_jitter", "concurrency", "existence_check"} {
		if _, ok := props[key]; !ok {
			t.Errorf("schema lacks property %q", key)
		}
	}
	c.AWSSecretAccessKeyEnv = ptr("S3_SECRET")
	eff := fields.Effective(&c)
	// *_env values are variable names and are shown (docs/security.md#secret-hygiene).
	if got := string(jsonx.Marshal(eff["aws_secret_access_key_env"], jsonx.UTF8)); got != `"S3_SECRET"` {
		t.Errorf("effective aws_secret_access_key_env = %s", got)
	}
}
