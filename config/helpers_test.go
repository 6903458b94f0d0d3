package config

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// testFileSink is a TEST STAND-IN for the file sink's Config (docs/file-sink.md);
// the real one lives in package sinks/file. It lets this package load
// file-sink configurations without importing a sink.
type testFileSink struct {
	Type               string `json:"type"`
	Directory          string `json:"directory" required:"true" nonblank:"true"`
	Mode               string `json:"mode" enum:"one_file_per_message"`
	FilenameStrategy   string `json:"filename_strategy" enum:"stream_sequence,message_id,payload_sha256"`
	DuplicatePolicy    string `json:"duplicate_policy" enum:"skip_existing,overwrite,fail"`
	PayloadMode        string `json:"payload_mode" enum:"json_or_envelope,json_only,text_envelope,bytes_envelope"`
	Extension          string `json:"extension"`
	Compression        string `json:"compression" enum:"none,gzip"`
	CompressionLevel   int    `json:"compression_level" min:"1" max:"9"`
	IncludeMetadata    bool   `json:"include_metadata"`
	PartitionBySubject bool   `json:"partition_by_subject"`
	CreateDirectory    bool   `json:"create_directory"`
	Fsync              bool   `json:"fsync"`
	Pretty             bool   `json:"pretty"`
}

func (*testFileSink) Open(context.Context, sink.Deps) (sink.Sink, error) {
	return nil, errors.New("test stand-in: not openable")
}

func defaultTestFileSink() *testFileSink {
	return &testFileSink{
		Mode: "one_file_per_message", FilenameStrategy: "stream_sequence", DuplicatePolicy: "skip_existing",
		PayloadMode: "json_or_envelope", Extension: ".json", Compression: "none", CompressionLevel: 6,
		IncludeMetadata: true, PartitionBySubject: true, CreateDirectory: true, Fsync: true,
	}
}

func decodeTestFileSink(raw json.RawMessage) (sink.Opener, error) {
	c := defaultTestFileSink()
	if err := fields.DecodeSink(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// testSecretSink is a fake sink with secret-bearing keys, for redaction.
type testSecretSink struct {
	Type        string            `json:"type"`
	DSN         string            `json:"dsn"`
	Password    *secret.Value     `json:"password"`
	PasswordEnv *string           `json:"password_env"`
	Headers     map[string]string `json:"headers" null:"empty"`
	HeadersEnv  map[string]string `json:"headers_env" null:"empty"`
}

func (*testSecretSink) Open(context.Context, sink.Deps) (sink.Sink, error) {
	return nil, errors.New("not openable")
}

func decodeTestSecretSink(raw json.RawMessage) (sink.Opener, error) {
	c := &testSecretSink{Headers: map[string]string{}, HeadersEnv: map[string]string{}}
	if err := fields.DecodeSink(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// rawOpener is an Opener that is not a fields-tagged struct.
type rawOpener struct{}

func (rawOpener) Open(context.Context, sink.Deps) (sink.Sink, error) {
	return nil, errors.New("not openable")
}

func testRegistry() *sink.Registry {
	r := sink.NewRegistry()
	r.Register("file", decodeTestFileSink)
	r.Register("postgres", decodeTestSecretSink)
	r.Register("kafka", func(json.RawMessage) (sink.Opener, error) { return rawOpener{}, nil })
	r.Register("http", func(json.RawMessage) (sink.Opener, error) { return rawOpener{}, nil })
	r.Register("nats", func(json.RawMessage) (sink.Opener, error) { return rawOpener{}, nil })
	return r
}

// noEnv is an environment with no variables set.
func noEnv(string) (string, bool) { return "", false }

// mapEnv is an environment holding exactly m.
func mapEnv(m map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
