package kafkasink

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

func problems(t *testing.T, err error) []sink.Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ce *sink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *sink.ConfigError", err, err)
	}
	return ce.Problems
}

func TestDecodeDefaults(t *testing.T) {
	op, err := Decode([]byte(`{"type":"kafka","brokers":["kafka-1:9092"],"topic":"orders"}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := Default()
	want.Brokers, want.Topic = []string{"kafka-1:9092"}, "orders"
	if diff := cmp.Diff(want, op.(Config)); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
	if want.Acks != "all" || !want.Idempotent || want.MaxRecordBytes != 1048576 || want.ProduceTimeoutMS != 30000 ||
		want.KeyStrategy != "idempotency_key" || want.RecordFormat != "envelope" || want.Compression != "none" ||
		want.ClientID != "nats-sink" || want.RecordTimestamp != "jetstream" || !want.ForwardHeaders || !want.IncludeMetadata ||
		want.TLS.Enabled || want.SASL.Mechanism != "none" {
		t.Errorf("defaults differ from docs/kafka.md: %+v", want)
	}
}

func TestDecodeAcceptsEverything(t *testing.T) {
	op, err := Decode([]byte(`{"type":" Kafka ","brokers":["10.0.0.1:9092","[::1]:9093","kafka.example:9094"],
		"topic":"orders.v1","topic_routes":[{"subject":"audit.>","topic":"audit_v1"}],
		"client_id":"sink-7","record_format":"raw","payload_mode":"bytes_envelope","include_metadata":"no",
		"key_strategy":"message_id","forward_headers":false,"record_timestamp":"now","acks":"all","idempotent":true,
		"compression":"zstd","max_record_bytes":"104857600","produce_timeout_ms":600000,
		"tls":{"enabled":true,"ca_file":"/etc/ca.pem","cert_file":"/etc/c.pem","key_file":"/etc/k.pem","insecure_skip_verify":false},
		"sasl":{"mechanism":" SCRAM-SHA-512 ","username":"svc","password_env":"KAFKA_PASSWORD"}}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	c := op.(Config)
	if c.Type != "kafka" || c.SASL.Mechanism != "scram-sha-512" || c.IncludeMetadata || c.MaxRecordBytes != 104857600 ||
		c.TopicRoutes[0] != (TopicRoute{Subject: "audit.>", Topic: "audit_v1"}) {
		t.Errorf("decoded %+v", c)
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []sink.Problem
	}{
		{"required", `{"type":"kafka"}`, []sink.Problem{{Path: "brokers", Message: "required"}, {Path: "topic", Message: "required"}}},
		{"unknown key", `{"type":"kafka","brokers":["a:1"],"topic":"t","acks_all":true}`,
			[]sink.Problem{{Path: "acks_all", Message: "unknown key"}}},
		{"per-key rules, schema order", `{"type":"kafka","brokers":[],"topic":"a b",
			"topic_routes":[{"subject":"x.>"}],"client_id":" c","record_format":"avro","payload_mode":"raw",
			"key_strategy":"uuid","record_timestamp":"broker","acks":"1","compression":"brotli",
			"max_record_bytes":1023,"produce_timeout_ms":999,
			"tls":{"enabled":"maybe"},"sasl":{"mechanism":"gssapi","password_env":"lower"}}`,
			[]sink.Problem{
				{Path: "brokers", Message: "must not be empty"},
				{Path: "topic", Message: `must match ^[A-Za-z0-9._-]{1,249}$ (got "a b")`},
				{Path: "topic_routes[0].topic", Message: "required"},
				{Path: "client_id", Message: "must not have surrounding whitespace"},
				{Path: "record_format", Message: `must be one of envelope, payload, raw (got "avro")`},
				{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "raw")`},
				{Path: "key_strategy", Message: `must be one of idempotency_key, stream_sequence, message_id, payload_sha256 (got "uuid")`},
				{Path: "record_timestamp", Message: `must be one of jetstream, now (got "broker")`},
				{Path: "acks", Message: `must be one of all (got "1")`},
				{Path: "compression", Message: `must be one of none, gzip, snappy, lz4, zstd (got "brotli")`},
				{Path: "max_record_bytes", Message: "must be between 1024 and 104857600 (got 1023)"},
				{Path: "produce_timeout_ms", Message: "must be between 1000 and 600000 (got 999)"},
				{Path: "tls.enabled", Message: "expected boolean (got string)"},
				{Path: "sasl.mechanism", Message: `must be one of none, plain, scram-sha-256, scram-sha-512 (got "gssapi")`},
				{Path: "sasl.password_env", Message: `must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "lower")`},
			}},
		{"cross-key rules", `{"type":"kafka","brokers":["kafka:9092","nohost",":9092","h:0","h:x","a/b:1"],"topic":"..",
			"topic_routes":[{"subject":"a..b","topic":"."},{"subject":"ok.>","topic":"ok"}],
			"idempotent":false,
			"tls":{"ca_file":"/ca.pem","cert_file":"/c.pem","insecure_skip_verify":true},
			"sasl":{"mechanism":"none","username":"u","password_env":"P"}}`,
			[]sink.Problem{
				{Path: "brokers[1]", Message: `must be host:port (got "nohost")`},
				{Path: "brokers[2]", Message: `must be host:port (got ":9092")`},
				{Path: "brokers[3]", Message: `port must be between 1 and 65535 (got "0")`},
				{Path: "brokers[4]", Message: `port must be between 1 and 65535 (got "x")`},
				{Path: "brokers[5]", Message: `host must be a host name or IP address (got "a/b")`},
				{Path: "topic", Message: `must not be ".."`},
				{Path: "topic_routes[0].subject", Message: "must not contain empty tokens"},
				{Path: "topic_routes[0].topic", Message: `must not be "."`},
				{Path: "idempotent", Message: "must be true: the sink always uses the idempotent producer"},
				{Path: "tls.ca_file", Message: "requires tls.enabled"},
				{Path: "tls.cert_file", Message: "requires tls.enabled"},
				{Path: "tls.cert_file", Message: "requires tls.key_file"},
				{Path: "tls.insecure_skip_verify", Message: "requires tls.enabled"},
				{Path: "sasl.username", Message: "requires a sasl.mechanism other than none"},
				{Path: "sasl.password_env", Message: "requires a sasl.mechanism other than none"},
			}},
		{"sasl needs credentials", `{"type":"kafka","brokers":["k:1"],"topic":"t","tls":{"enabled":true,"key_file":"/k.pem"},
			"sasl":{"mechanism":"plain"}}`,
			[]sink.Problem{
				{Path: "tls.key_file", Message: "requires tls.cert_file"},
				{Path: "sasl.username", Message: "required unless sasl.mechanism is none"},
				{Path: "sasl.password_env", Message: "required unless sasl.mechanism is none (or set sasl.password_file)"},
			}},
		{"one password source", `{"type":"kafka","brokers":["k:1"],"topic":"t",
			"sasl":{"mechanism":"scram-sha-256","username":"u","password_env":"P","password_file":"/p"}}`,
			[]sink.Problem{{Path: "sasl.password_env", Message: "set only one of password_env, password_file"}}},
		{"no plain password key", `{"type":"kafka","brokers":["k:1"],"topic":"t","sasl":{"mechanism":"plain","username":"u","password":"x"}}`,
			[]sink.Problem{{Path: "sasl.password", Message: "unknown key"}}},
		{"too many brokers", `{"type":"kafka","brokers":[` + manyBrokers(65) + `],"topic":"t"}`,
			[]sink.Problem{{Path: "brokers", Message: "must have at most 64 items (got 65)"}}},
		{"duplicate brokers", `{"type":"kafka","brokers":["k:1","k:1"],"topic":"t"}`,
			[]sink.Problem{{Path: "brokers[1]", Message: `duplicate value "k:1"`}}},
		{"topic length", `{"type":"kafka","brokers":["k:1"],"topic":"` + strings.Repeat("t", 250) + `"}`,
			[]sink.Problem{{Path: "topic", Message: `must match ^[A-Za-z0-9._-]{1,249}$ (got "` + strings.Repeat("t", 250) + `")`}}},
		{"boundaries accepted", `{"type":"kafka","brokers":["k:65535"],"topic":"` + strings.Repeat("t", 249) + `",
			"max_record_bytes":1024,"produce_timeout_ms":1000}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			if diff := cmp.Diff(tt.want, problems(t, err)); diff != "" {
				t.Errorf("Decode problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func manyBrokers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("a", i+1) + `:1"`)
	}
	return b.String()
}

// TestNewChecksHandBuiltConfigs: New applies the rules to a Config built in
// code, which never went through Decode, in the same order: the key rules
// first, and the rules between keys once those pass.
func TestNewChecksHandBuiltConfigs(t *testing.T) {
	c := Default()
	c.Brokers, c.Topic = []string{"k:1"}, "t"
	c.Acks, c.Idempotent, c.ProduceTimeoutMS = "1", false, 0
	_, err := New(t.Context(), c, sink.Deps{})
	want := []sink.Problem{
		{Path: "acks", Message: `must be one of all (got "1")`},
		{Path: "produce_timeout_ms", Message: "must be between 1000 and 600000 (got 0)"},
	}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("New problems (-want +got):\n%s", diff)
	}
	c.Acks, c.ProduceTimeoutMS = "all", 1000
	_, err = New(t.Context(), c, sink.Deps{})
	want = []sink.Problem{{Path: "idempotent", Message: "must be true: the sink always uses the idempotent producer"}}
	if diff := cmp.Diff(want, problems(t, err)); diff != "" {
		t.Errorf("New problems (-want +got):\n%s", diff)
	}
}

// TestSchemaAndEffective checks that the schema generator and the
// effective-config renderer describe every key, and that the password
// file's path is masked while the variable name is shown (docs/security.md#secret-hygiene).
func TestSchemaAndEffective(t *testing.T) {
	c := Default()
	s := fields.Schema(&c)
	props, _ := s["properties"].(map[string]any)
	for _, key := range []string{"brokers", "topic", "topic_routes", "client_id", "record_format", "payload_mode",
		"include_metadata", "key_strategy", "forward_headers", "record_timestamp", "acks", "idempotent", "compression",
		"max_record_bytes", "produce_timeout_ms", "tls", "sasl"} {
		if _, ok := props[key]; !ok {
			t.Errorf("schema lacks property %q", key)
		}
	}
	c.SASL = SASL{Mechanism: "plain", Username: ptr("u"), PasswordEnv: ptr("KAFKA_PW")}
	eff := fields.Effective(&c)
	if got := string(jsonx.Marshal(eff["sasl"], jsonx.UTF8)); got != `{"mechanism":"plain","password_env":"KAFKA_PW","password_file":null,"username":"u"}` {
		t.Errorf("effective sasl = %s", got)
	}
}

// TestBrokerNeverEchoesUserInfo: a broker written with user-info (the
// password of a SASL user) is refused without repeating it.
func TestBrokerNeverEchoesUserInfo(t *testing.T) {
	for _, b := range []string{"user:pw-s3cret@k:9092", "pw-s3cret@k:9092", "sasl://user:pw-s3cret@k:9092"} {
		_, err := Decode([]byte(`{"type":"kafka","brokers":["` + b + `"],"topic":"t"}`))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Decode(broker %q) = %v, want a problem that does not echo it", b, err)
		}
	}
}
