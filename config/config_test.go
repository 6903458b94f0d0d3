package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

// doc builds a configuration with a valid nats section (plus natsExtra
// keys), the sections in rest, and a file sink.
func doc(natsExtra, rest string) string {
	if rest != "" && !strings.HasSuffix(strings.TrimSpace(rest), ",") {
		rest += ","
	}
	return `{"nats": {"stream": "ORDERS", "consumer": "c", "subject": "orders.>"` + natsExtra + `}, ` + rest +
		` "sink": {"type": "file", "directory": "out"}}`
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	ce, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %T %v, want *config.Error", err, err)
	}
	return ce.Problems
}

func TestErrorText(t *testing.T) {
	for _, tt := range []struct {
		err  *Error
		want string
	}{
		{&Error{File: "a.json", Problems: []Problem{{Path: "nats.stream", Message: "required"}}}, "nats.stream: required"},
		{&Error{File: "orders.json", Problems: []Problem{
			{Path: "nats.urls[1]", Message: "scheme must be one of nats, tls, ws, wss"},
			{Path: "delivery.batch_size", Message: "must be between 1 and 10000 (got 0)"},
			{Path: "sink.directory", Message: "required"},
		}}, "3 problems in orders.json\n  nats.urls[1]: scheme must be one of nats, tls, ws, wss\n" +
			"  delivery.batch_size: must be between 1 and 10000 (got 0)\n  sink.directory: required"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestLoadFileLevelErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing.json")
	big := write("big.json", []byte(`{"x":"`+strings.Repeat("a", MaxFileSize)+`"}`))
	bom := write("bom.json", append([]byte("\xef\xbb\xbf"), doc("", "")...))
	latin1 := write("latin1.json", []byte(`{"a":"caf`+"\xe9"+`"}`))
	syntax := write("syntax.json", []byte(`{"nats": }`))
	dup := write("dup.json", []byte(`{"nats": {"stream": "a", "stream": "b"}}`))
	nan := write("nan.json", []byte(`{"delivery": {"retry_backoff_multiplier": NaN}}`))
	arr := write("arr.json", []byte(`[]`))
	for _, tt := range []struct {
		path string
		want string
	}{
		{missing, missing + ": cannot read configuration file: open " + missing + ": no such file or directory"},
		{big, big + ": configuration file exceeds the 1048576 byte limit"},
		{bom, bom + ": configuration file is not valid UTF-8 JSON"},
		{latin1, latin1 + ": configuration file is not valid UTF-8 JSON"},
		{syntax, syntax + ": invalid JSON at line 1 column 10: "},
		{dup, `nats: duplicate key "stream"`},
		{nan, "delivery.retry_backoff_multiplier: non-standard JSON constant is not allowed"},
		{arr, "(root): configuration root must be a JSON object"},
	} {
		_, err := Load(tt.path, testRegistry(), noEnv)
		if err == nil {
			t.Errorf("Load(%s) = nil error, want %q", filepath.Base(tt.path), tt.want)
			continue
		}
		if _, ok := errors.AsType[*Error](err); !ok {
			t.Errorf("Load(%s) error type %T, want *config.Error", filepath.Base(tt.path), err)
		}
		if got := err.Error(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("Load(%s) = %q, want prefix %q", filepath.Base(tt.path), got, tt.want)
		}
	}
	exact := write("exact.json", []byte(doc("", "")+strings.Repeat(" ", MaxFileSize-len(doc("", "")))))
	if _, err := Load(exact, testRegistry(), noEnv); err != nil {
		t.Errorf("Load(file of exactly 1 MiB) = %v, want nil", err)
	}
}

func TestProblems(t *testing.T) {
	key := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes
	short := "AAECAwQFBgcICQoLDA0ODw=="                   // 16 bytes
	for _, tt := range []struct {
		name string
		doc  string
		want []Problem
	}{
		{"valid", doc("", ""), nil},
		{"nats required", `{"sink": {"type": "file", "directory": "d"}}`, []Problem{{Path: "nats", Message: "required"}}},
		{"nats keys required", `{"nats": {}, "sink": {"type": "file", "directory": "d"}}`, []Problem{
			{Path: "nats.stream", Message: "required"}, {Path: "nats.consumer", Message: "required"}, {Path: "nats.subject", Message: "required"}}},
		{"sink required", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}}`, []Problem{{Path: "sink", Message: "required"}}},
		{"several problems in schema order", `{"nats": {"urls": ["nats://a:4222", "http://b"], "consumer": "c", "subject": "s.>"},
		  "delivery": {"batch_size": 0}, "sink": {"type": "file"}}`, []Problem{
			{Path: "nats.urls[1]", Message: "scheme must be one of nats, tls, ws, wss"},
			{Path: "nats.stream", Message: "required"},
			{Path: "delivery.batch_size", Message: "must be between 1 and 10000 (got 0)"},
			{Path: "sink.directory", Message: "required"},
		}},
		{"unknown keys", doc(`, "strem": "x"`, `"delivery": {"batch_sise": 5}, "natz": {}`), []Problem{
			{Path: "nats.strem", Message: `unknown key (did you mean "stream")`},
			{Path: "delivery.batch_sise", Message: `unknown key (did you mean "batch_size")`},
			{Path: "natz", Message: `unknown key (did you mean "nats")`},
		}},

		{"coercions rejected (Q24)", doc(`, "durable": "maybe", "name": 5`, `"delivery": {"batch_size": true, "retry_backoff_multiplier": false, "max_retries": "3.5"}`), []Problem{
			{Path: "nats.durable", Message: "expected boolean (got string)"},
			{Path: "nats.name", Message: "expected string (got number)"},
			{Path: "delivery.batch_size", Message: "expected integer (got boolean)"},
			{Path: "delivery.max_retries", Message: "expected integer (got string)"},
			{Path: "delivery.retry_backoff_multiplier", Message: "expected number (got boolean)"},
		}},
		{"null only where allowed", doc(`, "url": null, "name": null`, `"delivery": {"priority_lanes": {"lanes": [{"name": "default", "priorities": null}]}}, "dead_letter": {"subject": null}`), []Problem{
			{Path: "nats.url", Message: "expected string (got null)"},
		}},

		// nats (§3)
		{"url scheme", doc(`, "url": "http://x:4222"`, ""), []Problem{{Path: "nats.url", Message: "scheme must be one of nats, tls, ws, wss"}}},
		{"url host", doc(`, "url": "nats://"`, ""), []Problem{{Path: "nats.url", Message: "must include a host"}}},
		{"url credentials", doc(`, "url": "nats://u:secretpw@host:4222"`, ""), []Problem{{Path: "nats.url", Message: "must not include credentials; use nats.user, nats.password_env, nats.token_env, nats.creds_file or nats.nkey_seed_file"}}},
		{"url control", doc(`, "url": "nats://ho\u0000st:4222"`, ""), []Problem{{Path: "nats.url", Message: "must not contain control characters"}}},
		{"url trimmed", doc(`, "url": " nats://host:4222 "`, ""), nil},
		{"urls mixed", doc(`, "urls": ["ws://a:80", "nats://b:4222"]`, ""), []Problem{{Path: "nats.urls", Message: "must not mix ws/wss with nats/tls URLs"}}},
		{"urls type", doc(`, "urls": "nats://a"`, ""), []Problem{{Path: "nats.urls", Message: "expected array (got string)"}}},
		{"stream chars (Q23)", `{"nats": {"stream": "a.b", "consumer": "c d", "subject": "a..b"}, "sink": {"type": "file", "directory": "d"}}`, []Problem{
			{Path: "nats.stream", Message: `must not contain whitespace, '.', '*', '>', '/' or '\'`},
			{Path: "nats.consumer", Message: `must not contain whitespace, '.', '*', '>', '/' or '\'`},
			{Path: "nats.subject", Message: "invalid subject pattern: must not contain empty tokens"},
		}},
		{"stream empty", `{"nats": {"stream": "", "consumer": "c", "subject": "s"}, "sink": {"type": "file", "directory": "d"}}`, []Problem{{Path: "nats.stream", Message: "must not be empty"}}},
		{"auth exclusive", doc(`, "token_env": "T", "creds_file": "/c.creds"`, ""), []Problem{{Path: "nats", Message: "configure a single NATS authentication method"}}},
		{"user needs password", doc(`, "user": "u"`, ""), []Problem{{Path: "nats.user", Message: "requires one of nats.password, nats.password_env, nats.password_file"}}},
		{"password needs user", doc(`, "password_env": "P"`, ""), []Problem{{Path: "nats.password_env", Message: "requires nats.user"}}},
		{"password sources", doc(`, "user": "u", "password": "pw", "password_env": "P"`, ""), []Problem{{Path: "nats.password", Message: "set only one of password, password_env, password_file"}}},
		{"token sources", doc(`, "token": "t", "token_file": "/run/t"`, ""), []Problem{{Path: "nats.token", Message: "set only one of token, token_env, token_file"}}},
		{"user and password ok", doc(`, "user": "u", "password_file": "/run/secrets/pw"`, ""), nil},
		{"path keys", doc(`, "creds_file": " x", "tls_ca_file": ""`, ""), []Problem{
			{Path: "nats.creds_file", Message: "must not have surrounding whitespace"}, {Path: "nats.tls_ca_file", Message: "must not be empty"}}},
		{"tls key needs cert", doc(`, "tls_key_file": "/k.pem"`, ""), []Problem{{Path: "nats.tls_key_file", Message: "requires nats.tls_cert_file"}}},
		{"domain and api_prefix", doc(`, "domain": "hub", "api_prefix": "$JS.hub.API"`, ""), []Problem{{Path: "nats.api_prefix", Message: "must not be set together with nats.domain"}}},
		{"integer ranges", doc(`, "connect_timeout_seconds": 0, "max_reconnect_attempts": -2, "pending_size_bytes": 1023`, ""), []Problem{
			{Path: "nats.connect_timeout_seconds", Message: "must be between 1 and 300 (got 0)"},
			{Path: "nats.max_reconnect_attempts", Message: "must be between -1 and 1000000 (got -2)"},
			{Path: "nats.pending_size_bytes", Message: "must be between 1024 and 1073741824 (got 1023)"},
		}},
		{"websocket headers need ws", doc(`, "websocket_headers": {"X-Tenant": "a"}`, ""), []Problem{{Path: "nats.websocket_headers", Message: "requires ws:// or wss:// server URLs"}}},
		{"websocket header rules", doc(`, "url": "wss://h:443", "websocket_headers": {"Authorization": "Bearer x", "Host": "h", "X-A": " v", "x-a": "w", "bad name": "v"},
		   "websocket_headers_env": {"X-Tenant": "lower_case", "X-B": "B_VAR", "X-A": "A"}`, ""), []Problem{
			{Path: "nats.websocket_headers.Authorization", Message: "carries credentials; set it through nats.websocket_headers_env"},
			{Path: "nats.websocket_headers.Host", Message: "is a WebSocket protocol header and cannot be set"},
			{Path: "nats.websocket_headers.X-A", Message: "must not have surrounding whitespace"},
			{Path: "nats.websocket_headers.bad name", Message: "invalid header name"},
			{Path: "nats.websocket_headers.x-a", Message: `duplicate header name (same as "X-A" ignoring case)`},
			{Path: "nats.websocket_headers_env.X-Tenant", Message: `must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "lower_case")`},
			{Path: "nats.websocket_headers_env.X-A", Message: `header "X-A" is also set in nats.websocket_headers`},
		}},
		{"websocket env header for credentials ok", doc(`, "url": "ws://h:80", "websocket_headers_env": {"Authorization": "WS_AUTH"}`, ""), nil},

		// consumer_management (§4)
		{"filter subjects", doc("", `"consumer_management": {"filter_subjects": ["orders.a", "orders.a", "other.>", "bad..x"]}`), []Problem{
			{Path: "consumer_management.filter_subjects[1]", Message: `duplicate filter subject "orders.a"`},
			{Path: "consumer_management.filter_subjects[2]", Message: `"other.>" is not contained by nats.subject "orders.>"`},
			{Path: "consumer_management.filter_subjects[3]", Message: "invalid subject pattern: must not contain empty tokens"},
		}},
		{"filter subjects null", doc("", `"consumer_management": {"filter_subjects": null, "metadata": null}`), nil},
		{"backoff rules", doc("", `"consumer_management": {"backoff_seconds": [1, 2], "ack_wait_seconds": 30}`), []Problem{
			{Path: "consumer_management.backoff_seconds", Message: "requires consumer_management.max_deliver"},
			{Path: "consumer_management.backoff_seconds", Message: "must not be set together with consumer_management.ack_wait_seconds"},
		}},
		{"backoff longer than max_deliver", doc("", `"consumer_management": {"backoff_seconds": [1, 2, 3], "max_deliver": 2}`), []Problem{
			{Path: "consumer_management.backoff_seconds", Message: "must have at most max_deliver (2) entries (got 3)"}}},
		{"backoff strict numbers", doc("", `"consumer_management": {"backoff_seconds": ["1", 0], "max_deliver": 5}`), []Problem{
			{Path: "consumer_management.backoff_seconds[0]", Message: "expected number (got string)"},
			{Path: "consumer_management.backoff_seconds[1]", Message: "must be greater than 0 and at most 604800 (got 0)"},
		}},
		{"ack wait range", doc("", `"consumer_management": {"ack_wait_seconds": 0, "mode": "sometimes"}`), []Problem{
			{Path: "consumer_management.mode", Message: `must be one of bind_only, create_if_missing, reconcile (got "sometimes")`},
			{Path: "consumer_management.ack_wait_seconds", Message: "must be greater than 0 and at most 86400 (got 0)"},
		}},
		{"metadata keys", doc("", `"consumer_management": {"metadata": {"db_password": "x", "1abc": "y", "team": " padded"}}`), []Problem{
			{Path: "consumer_management.metadata.team", Message: "must not have surrounding whitespace"},
			{Path: "consumer_management.metadata.1abc", Message: "key must match ^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$"},
			{Path: "consumer_management.metadata.db_password", Message: `key must not name secret material (contains "password"); consumer metadata is readable by anyone who can read the consumer`},
		}},

		// delivery (§5)
		{"prefer_safe_duplication false (Q2)", doc("", `"delivery": {"prefer_safe_duplication": false}`), []Problem{
			{Path: "delivery.prefer_safe_duplication", Message: "false is not supported; the runtime always prefers redelivery over loss"}}},
		{"ack_policy", doc("", `"delivery": {"ack_policy": "before_commit"}`), []Problem{
			{Path: "delivery.ack_policy", Message: `must be one of after_sink_commit (got "before_commit")`}}},
		{"backoff max below min", doc("", `"delivery": {"retry_backoff_ms": 5000, "retry_backoff_max_ms": 1000}`), []Problem{
			{Path: "delivery.retry_backoff_max_ms", Message: "must be at least delivery.retry_backoff_ms (5000) (got 1000)"}}},
		{"delivery ranges", doc("", `"delivery": {"batch_timeout_ms": 0, "max_batch_bytes": 1048575, "max_in_flight_batches": 65, "retry_backoff_multiplier": 0.5}`), []Problem{
			{Path: "delivery.batch_timeout_ms", Message: "must be at least 1 (got 0)"},
			{Path: "delivery.max_batch_bytes", Message: "must be between 1048576 and 60000000 (got 1048575)"},
			{Path: "delivery.max_in_flight_batches", Message: "must be between 1 and 64 (got 65)"},
			{Path: "delivery.retry_backoff_multiplier", Message: "must be between 1.0 and 10.0 (got 0.5)"},
		}},
		{"lanes", doc("", `"delivery": {"priority_lanes": {"enabled": true, "default_lane": " Bulk ", "lanes": [
			{"name": "high", "priorities": ["P1", "urgent"]}, {"name": "high", "priorities": "p1"}, {"name": "9x"}]}}`), []Problem{
			{Path: "delivery.priority_lanes.default_lane", Message: `"bulk" does not name a lane`},
			{Path: "delivery.priority_lanes.lanes[1].name", Message: `duplicate lane name "high"`},
			{Path: "delivery.priority_lanes.lanes[2].name", Message: `must match ^[a-z][a-z0-9_-]{0,63}$ (got "9x")`},
		}},
		{"lane priorities across lanes", doc("", `"delivery": {"priority_lanes": {"max_priority_value_length": 3, "lanes": [
			{"name": "default", "priorities": ["a"]}, {"name": "high", "priorities": [" A ", "abcd", ""], "weight": 0}]}}`), []Problem{
			{Path: "delivery.priority_lanes.lanes[1].priorities[0]", Message: `priority "a" is already assigned to lane "default"`},
			{Path: "delivery.priority_lanes.lanes[1].priorities[1]", Message: "must be at most max_priority_value_length (3) characters"},
			{Path: "delivery.priority_lanes.lanes[1].priorities[2]", Message: "must not be empty"},
			{Path: "delivery.priority_lanes.lanes[1].weight", Message: "must be between 1 and 100 (got 0)"},
		}},
		{"lane priorities after decode", doc("", `"delivery": {"priority_lanes": {"max_priority_value_length": 3, "lanes": [
			{"name": "default", "priorities": ["a"]}, {"name": "high", "priorities": [" A ", "abcd"]}]}}`), []Problem{
			{Path: "delivery.priority_lanes.lanes[1].priorities[0]", Message: `priority "a" is already assigned to lane "default"`},
			{Path: "delivery.priority_lanes.lanes[1].priorities[1]", Message: "must be at most max_priority_value_length (3) characters"},
		}},
		{"in_progress cross rules", doc(`, "durable": false`, `"delivery": {"in_progress": {"enabled": true}}, "consumer_management": {"backoff_seconds": [1], "max_deliver": 3}`), []Problem{
			{Path: "delivery.in_progress.enabled", Message: "requires nats.durable to be true"},
			{Path: "delivery.in_progress.enabled", Message: "must not be used with consumer_management.backoff_seconds"},
			{Path: "delivery.in_progress.enabled", Message: "requires consumer_management.ack_wait_seconds (unless consumer_management.mode is bind_only)"},
		}},
		{"in_progress interval vs ack wait", doc("", `"delivery": {"in_progress": {"enabled": true, "interval_ms": 8000}}, "consumer_management": {"ack_wait_seconds": 10}`), []Problem{
			{Path: "delivery.in_progress.interval_ms", Message: "must be less than 80% of consumer_management.ack_wait_seconds (8000 ms) (got 8000)"}}},
		{"in_progress bind_only", doc("", `"delivery": {"in_progress": {"enabled": true}}, "consumer_management": {"mode": "bind_only"}`), nil},
		{"ack_confirmation", doc("", `"delivery": {"ack_confirmation": {"timeout_ms": 0, "unsupported_action": "ignore"}}`), []Problem{
			{Path: "delivery.ack_confirmation.timeout_ms", Message: "must be between 1 and 60000 (got 0)"},
			{Path: "delivery.ack_confirmation.unsupported_action", Message: `must be one of fail, standard_ack (got "ignore")`},
		}},

		// dead_letter (§6, Q12)
		{"dlq subject required", doc("", `"dead_letter": {"enabled": true}`), []Problem{{Path: "dead_letter.subject", Message: "required when dead_letter.enabled is true"}}},
		{"dlq literal", doc("", `"dead_letter": {"enabled": true, "subject": "dlq.*"}`), []Problem{{Path: "dead_letter.subject", Message: "must be a literal subject (no wildcards)"}}},
		{"dlq loop", doc("", `"dead_letter": {"enabled": true, "subject": "orders.dead"}`), []Problem{{Path: "dead_letter.subject", Message: "would be consumed by this sink's own consumer"}}},
		{"dlq loop via filter", `{"nats": {"stream": "S", "consumer": "c", "subject": ">"}, "consumer_management": {"filter_subjects": ["dlq.>"]},
			"dead_letter": {"enabled": true, "subject": "dlq.x"}, "sink": {"type": "file", "directory": "d"}}`, []Problem{
			{Path: "dead_letter.subject", Message: "would be consumed by this sink's own consumer"}}},
		{"dlq ok", doc("", `"dead_letter": {"enabled": true, "subject": "dlq.orders", "publish_timeout_ms": 99}`), []Problem{
			{Path: "dead_letter.publish_timeout_ms", Message: "must be between 100 and 60000 (got 99)"}}},

		// logging, metrics (§7.1, §7.2)
		{"payload logging (Q3)", doc("", `"logging": {"payload_logging": true, "level": "verbose", "format": "xml"}`), []Problem{
			{Path: "logging.level", Message: `must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (got "verbose")`},
			{Path: "logging.payload_logging", Message: "payload logging is not supported; payloads are never logged"},
			{Path: "logging.format", Message: `must be one of json, text (got "xml")`},
		}},
		{"metrics", doc("", `"metrics": {"namespace": "1x", "snapshot_file": "a\nb", "listen": "localhost", "event_stale_after_seconds": -1}`), []Problem{
			{Path: "metrics.namespace", Message: `must match ^[A-Za-z_:][A-Za-z0-9_:]*$ (got "1x")`},
			{Path: "metrics.snapshot_file", Message: "must not contain control characters"},
			{Path: "metrics.event_stale_after_seconds", Message: "must be between 0 and 31536000 (got -1)"},
			{Path: "metrics.listen", Message: "must be host:port (for example 127.0.0.1:9464, [::1]:9464 or :9464)"},
		}},
		{"metrics port", doc("", `"metrics": {"listen": "[::1]:70000"}`), []Problem{{Path: "metrics.listen", Message: `port must be between 1 and 65535 (got "70000")`}}},
		{"metrics listen forms", doc("", `"metrics": {"listen": ":9464", "event_stale_after_seconds": null}`), nil},

		// message_metadata (§7.3)
		{"metadata rules", doc("", `"message_metadata": {"priority": {"header": " "}, "labels": {"default": ["a;b"]},
			"rules": [{"subject": "a.>"}, {"subject": "b..c", "priority": null}, {"priority": "x"}]}`), []Problem{
			{Path: "message_metadata.priority.header", Message: "must not be empty"},
			{Path: "message_metadata.labels.default[0]", Message: "must not contain ';'"},
			{Path: "message_metadata.rules[0]", Message: "must set at least one of priority, classification, labels"},
			{Path: "message_metadata.rules[1].subject", Message: "invalid subject pattern: must not contain empty tokens"},
			{Path: "message_metadata.rules[2].subject", Message: "required"},
		}},

		// encryption (§7.4)
		{"encryption key material", doc("", `"encryption": {"key_b64": "`+short+`"}`), []Problem{{Path: "encryption.key_b64", Message: "must decode to exactly 32 bytes for AES-256"}}},
		{"encryption key base64", doc("", `"encryption": {"key_b64": "AAEC AwQ"}`), []Problem{{Path: "encryption.key_b64", Message: "must be standard base64 with padding"}}},
		{"encryption key sources", doc("", `"encryption": {"key_b64": "`+key+`", "key_b64_env": "K"}`), []Problem{{Path: "encryption.key_b64", Message: "set only one of key_b64, key_b64_env, key_b64_file"}}},
		{"encryption enabled needs key", doc("", `"encryption": {"enabled": true}`), []Problem{{Path: "encryption", Message: "key_b64_env or key_b64 is required because encryption.enabled is true"}}},
		{"gcm nonce (Q13)", doc("", `"encryption": {"nonce_size_bytes": 7}`), []Problem{{Path: "encryption.nonce_size_bytes", Message: "must be between 8 and 13 for aes-256-gcm (got 7)"}}},
		{"ccm nonce 7 ok", doc("", `"encryption": {"algorithm": "AES_256_CCM", "nonce_size_bytes": 7, "tag_length": 8}`), nil},
		{"tag length", doc("", `"encryption": {"tag_length": 5, "algorithm": "aes-128-gcm"}`), []Problem{
			{Path: "encryption.algorithm", Message: `must be one of aes-256-gcm, aes-256-ccm (got "aes-128-gcm")`},
			{Path: "encryption.tag_length", Message: "must be one of 4, 6, 8, 10, 12, 14, 16 (got 5)"},
		}},
		{"encryption rules", doc("", `"encryption": {"rules": [{"subject": "a.>"}, {"subject": "b.>", "enabled": false}, {"subject": "c.>", "key_b64_env": "K", "nonce_size_bytes": 7},
			{"subject": "d.>", "algorithm": null}]}`), []Problem{
			{Path: "encryption.rules[0]", Message: "key_b64_env or key_b64 is required because no top-level encryption key is configured"},
			{Path: "encryption.rules[2].nonce_size_bytes", Message: "must be between 8 and 13 for aes-256-gcm (got 7)"},
			{Path: "encryption.rules[3]", Message: "key_b64_env or key_b64 is required because no top-level encryption key is configured"},
			{Path: "encryption.rules[3].algorithm", Message: "expected string (got null)"},
		}},
		{"encryption rules inherit top-level key", doc("", `"encryption": {"key_b64_env": "K", "rules": [{"subject": "a.>"}]}`), nil},

		// tracing (§8)
		{"tracing", doc("", `"tracing": {"exporter": "stdout", "endpoint": "ftp://x", "sample_ratio": 1.5, "service_name": " ", "headers_env": {"X-Key": "bad-name"}}`), []Problem{
			{Path: "tracing.endpoint", Message: "must be an http:// or https:// URL"},
			{Path: "tracing.endpoint", Message: `must not be set with exporter "stdout"`},
			{Path: "tracing.sample_ratio", Message: "must be between 0.0 and 1.0 (got 1.5)"},
			{Path: "tracing.service_name", Message: "must not be empty"},
			{Path: "tracing.headers_env.X-Key", Message: `must match ^[A-Z_][A-Z0-9_]{0,127}$ (got "bad-name")`},
		}},
		{"tracing grpc path", doc("", `"tracing": {"exporter": "otlp-grpc", "endpoint": "http://collector:4317/v1/traces"}`), []Problem{
			{Path: "tracing.endpoint", Message: `must not include a path with exporter "otlp-grpc"`}}},
		{"tracing query", doc("", `"tracing": {"endpoint": "https://collector:4318/v1/traces?x=1"}`), []Problem{
			{Path: "tracing.endpoint", Message: "must not include a query or fragment"}}},
		{"tracing http path ok", doc("", `"tracing": {"endpoint": "https://collector:4318/custom/traces"}`), nil},
		{"tracing ok", doc("", `"tracing": {"enabled": true, "exporter": "otlp-grpc", "endpoint": "http://collector:4317", "headers_env": {"Authorization": "OTLP_AUTH"}}`), nil},

		// §9 unsupported sections and sink types
		{"unsupported enabled", doc("", `"size_policy": {"enabled": "yes"}, "plugins": []`), []Problem{
			{Path: "size_policy.enabled", Message: "size policy is not supported by nats-sink; remove the section or disable it"},
			{Path: "plugins", Message: "expected object (got array)"},
		}},
		{"upstream sink type", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "sink": {"type": " Gotham "}}`, []Problem{
			{Path: "sink.type", Message: `"gotham" is an upstream sink type that nats-sink does not provide`}}},
		{"unknown sink type", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "sink": {"type": "redis"}}`, []Problem{
			{Path: "sink.type", Message: `unknown sink type "redis" (expected one of file, postgres, kafka, http, nats)`}}},
		{"sink type missing", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "sink": {"directory": "d"}}`, []Problem{{Path: "sink.type", Message: "required"}}},
		{"sink not object", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "sink": "file"}`, []Problem{{Path: "sink", Message: "expected object (got string)"}}},
		{"sink problems prefixed", `{"nats": {"stream": "S", "consumer": "c", "subject": "s"}, "sink": {"type": "FILE", "compression_level": 10, "directry": "d"}}`, []Problem{
			{Path: "sink.directory", Message: "required"},
			{Path: "sink.compression_level", Message: "must be between 1 and 9 (got 10)"},
			{Path: "sink.directry", Message: `unknown key (did you mean "directory")`},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "test.json", testRegistry(), noEnv)
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("Parse problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	c, err := Parse([]byte(doc(`, "urls": [" nats://a:4222 ", "tls://b:4222"], "max_reconnect_attempts": "-1"`, `
		"delivery": {"batch_size": "5", "retry_backoff_multiplier": "2.5", "fail_fast": "yes", "max_retries": 3.0,
		             "priority_lanes": {"lanes": [{"name": " Default ", "priorities": " HIGH "}]}},
		"logging": {"level": " warning "},
		"message_metadata": {"priority": {"default": "  "}, "classification": {"default": " secret "},
		                     "labels": {"default": " a ;b;; a"},
		                     "rules": [{"subject": "x.>", "labels": null}, {"subject": "y", "priority": null, "labels": ["p", "p", " q "]}]},
		"encryption": {"algorithm": "AES_256_GCM", "rules": [{"subject": "s.>", "enabled": false}]},
		"mission_metadata": {"enabled": false}, "sinks": {},
		"metrics": {"enabled": 1}`)), "test.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"urls", c.NATS.Servers(), []string{"nats://a:4222", "tls://b:4222"}},
		{"max_reconnect_attempts", c.NATS.MaxReconnectAttempts, -1},
		{"batch_size", c.Delivery.BatchSize, 5},
		{"multiplier", c.Delivery.RetryBackoffMultiplier, 2.5},
		{"fail_fast", c.Delivery.FailFast, true},
		{"max_retries", c.Delivery.MaxRetries, 3},
		{"lanes", c.Delivery.PriorityLanes.Lanes, []Lane{{Name: "default", Priorities: []string{"high"}, Weight: 1}}},
		{"level", c.Logging.Level, "WARNING"},
		{"priority default", c.MessageMetadata.Priority.Default, (*string)(nil)},
		{"classification default", *c.MessageMetadata.Classification.Default, "secret"},
		{"labels default", c.MessageMetadata.Labels.Default, []string{"a", "b"}},
		{"rules", c.MessageMetadata.Rules, []MetadataRule{
			{Subject: "x.>", Labels: []string{}, HasLabels: true},
			{Subject: "y", Labels: []string{"p", "q"}, HasPriority: true, HasLabels: true},
		}},
		{"algorithm", c.Encryption.Algorithm, "aes-256-gcm"},
		{"rule enabled", c.Encryption.Rules[0].Enabled, false},
		{"sink type", c.Sink.Type, "file"},
		{"opener", c.Sink.Opener.(*testFileSink).Directory, "out"},
		{"warnings", c.Warnings, []string{
			"mission_metadata: ignored (feature not supported; section is disabled)",
			"metrics.enabled: no exporter configured (set metrics.listen or metrics.snapshot_file)",
		}},
	}
	for _, ch := range checks {
		if diff := cmp.Diff(ch.want, ch.got); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", ch.name, diff)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	base := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": "file", "directory": "d"}}`
	for _, tt := range []struct {
		name  string
		doc   string
		env   map[string]string
		check func(*Config) (got, want any)
		want  []Problem
	}{
		{name: "stream replaced", doc: base, env: map[string]string{"NATS_SINKS_NATS_STREAM": "OTHER"},
			check: func(c *Config) (any, any) { return c.NATS.Stream, "OTHER" }},
		{name: "intermediate created", doc: base, env: map[string]string{"NATS_SINKS_LOG_LEVEL": "debug", "NATS_SINKS_TRACING_ENABLED": "on"},
			check: func(c *Config) (any, any) {
				return []any{c.Logging.Level, c.Tracing.Enabled}, []any{"DEBUG", true}
			}},
		{name: "coerced integer", doc: base, env: map[string]string{"NATS_SINKS_DELIVERY_MAX_IN_FLIGHT_BATCHES": " 8 "},
			check: func(c *Config) (any, any) { return c.Delivery.MaxInFlightBatches, 8 }},
		{name: "labels string", doc: base, env: map[string]string{"NATS_SINKS_LABELS_DEFAULT": "a; b;a"},
			check: func(c *Config) (any, any) { return c.MessageMetadata.Labels.Default, []string{"a", "b"} }},
		{name: "sink type trimmed", doc: `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": "nope", "directory": "d"}}`,
			env:   map[string]string{"NATS_SINKS_SINK_TYPE": " File "},
			check: func(c *Config) (any, any) { return c.Sink.Type, "file" }},
		{name: "metrics listen", doc: base, env: map[string]string{"NATS_SINKS_METRICS_LISTEN": "0.0.0.0:9464"},
			check: func(c *Config) (any, any) { return *c.Metrics.Listen, "0.0.0.0:9464" }},
		{name: "empty string", doc: base, env: map[string]string{"NATS_SINKS_NATS_STREAM": ""},
			want: []Problem{{Path: "nats.stream", Message: "must not be empty"}}},
		{name: "empty boolean", doc: base, env: map[string]string{"NATS_SINKS_NATS_NO_ECHO": ""},
			want: []Problem{{Path: "nats.no_echo", Message: "expected boolean (got string)"}}},
		{name: "bad integer", doc: base, env: map[string]string{"NATS_SINKS_DELIVERY_MAX_IN_FLIGHT_BATCHES": "many"},
			want: []Problem{{Path: "delivery.max_in_flight_batches", Message: "expected integer (got string)"}}},
		{name: "bad intermediate", doc: `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "logging": "loud", "sink": {"type": "file", "directory": "d"}}`,
			env: map[string]string{"NATS_SINKS_LOG_LEVEL": "DEBUG"},
			want: []Problem{
				{Path: "logging", Message: "cannot apply environment override NATS_SINKS_LOG_LEVEL"},
				{Path: "logging", Message: "expected object (got string)"},
			}},
		{name: "unsupported section enabled", doc: base, env: map[string]string{"NATS_SINKS_MISSION_METADATA_ENABLED": "true"},
			want: []Problem{{Path: "mission_metadata.enabled", Message: "mission metadata is not supported by nats-sink; remove the section or disable it"}}},
		{name: "unsupported section disabled", doc: base, env: map[string]string{"NATS_SINKS_ADVISORIES_ENABLED": "0"},
			check: func(c *Config) (any, any) {
				return c.Warnings, []string{"advisories: ignored (feature not supported; section is disabled)"}
			}},
		{name: "encryption enabled without key", doc: base, env: map[string]string{"NATS_SINKS_ENCRYPTION_ENABLED": "true"},
			want: []Problem{{Path: "encryption", Message: "key_b64_env or key_b64 is required because encryption.enabled is true"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc), "test.json", testRegistry(), mapEnv(tt.env))
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Fatalf("problems mismatch (-want +got):\n%s", diff)
			}
			if tt.check != nil {
				got, want := tt.check(c)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("value mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestEffectiveRedaction(t *testing.T) {
	key := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	d := `{"nats": {"url": "ws://h:80", "stream": "S", "consumer": "c", "subject": "s.>", "user": "alice", "password": "hunter2-pw",
	        "websocket_headers": {"X-Tenant": "tenant-value"}, "websocket_headers_env": {"Authorization": "WS_AUTH_VAR"}},
	  "encryption": {"key_b64": "` + key + `", "rules": [{"subject": "a.>", "key_b64_env": "RULE_KEY_VAR"}]},
	  "tracing": {"headers_env": {"X-Token": "OTLP_TOKEN_VAR"}},
	  "message_authenticity": {"rules": [{"subject": "a.>", "key_id": "k", "key_b64": "` + key + `"}, {"subject": "b.>", "key_id": "k", "key_b64_env": "AUTH_KEY_VAR"}]},
	  "sink": {"type": "postgres", "dsn": "postgres://u:dsnpass@db/x", "password": "sinkpw", "password_env": "SINK_PW_VAR",
	           "headers": {"X-Api-Token": "tokval", "X-Plain": "plain"}, "headers_env": {"X-Auth-Token": "HDR_VAR"}}}`
	c, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	s := string(out)
	for _, secret := range []string{"hunter2-pw", key, "tenant-value", "dsnpass", "sinkpw", "tokval"} {
		if strings.Contains(s, secret) {
			t.Errorf("Effective output contains secret %q:\n%s", secret, s)
		}
	}
	for _, shown := range []string{"WS_AUTH_VAR", "RULE_KEY_VAR", "OTLP_TOKEN_VAR", "SINK_PW_VAR", "HDR_VAR", "AUTH_KEY_VAR", `"X-Tenant": "********"`, `"user": "alice"`, `"X-Plain": "********"`, `"key_b64_env": null`} {
		if !strings.Contains(s, shown) {
			t.Errorf("Effective output lacks %q:\n%s", shown, s)
		}
	}
	if !strings.HasSuffix(s, "}\n") || !strings.HasPrefix(s, "{\n  \"consumer_management\": {") {
		t.Errorf("Effective output is not pretty canonical JSON with a trailing newline:\n%s", s)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("Effective output is not JSON: %v", err)
	}
}

// TestEffectiveRedactsEndpointsAndHeaderMaps checks the HTTP sink's URL
// (scheme://host:port, the path masked) and every header map, in sink and
// in a connection object inside it.
func TestEffectiveRedactsEndpointsAndHeaderMaps(t *testing.T) {
	for _, tt := range []struct {
		name, sink string
		want       map[string]any
	}{
		{"http path", `{"type": "http", "url": "https://hooks.example.com:8443/services/T0K3N/abc", "headers": {"X-Plain": "plain-value"}}`,
			map[string]any{"type": "http", "url": "https://hooks.example.com:8443/********", "headers": map[string]any{"X-Plain": "********"}}},
		{"http root", `{"type": "http", "url": "https://hooks.example.com/"}`,
			map[string]any{"type": "http", "url": "https://hooks.example.com"}},
		{"http user-info", `{"type": "http", "url": "https://u:pw@hooks.example.com/x"}`,
			map[string]any{"type": "http", "url": "********"}},
		{"republish connection", `{"type": "nats", "connection": {"url": "ws://h:80", "websocket_headers": {"X-Tenant": "tenant-value"}, "websocket_headers_env": {"Authorization": "WS_VAR"}}}`,
			map[string]any{"type": "nats", "connection": map[string]any{"url": "ws://h:80", "websocket_headers": map[string]any{"X-Tenant": "********"}, "websocket_headers_env": map[string]any{"Authorization": "WS_VAR"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": ` + tt.sink + `}`
			c, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			out, _ := c.Effective()
			var back map[string]any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, back["sink"]); diff != "" {
				t.Errorf("effective sink mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEffectiveRawSink(t *testing.T) {
	d := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": " KAFKA ", "brokers": ["a:9092"], "sasl_password": "kpw"}}`
	c, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	out, _ := c.Effective()
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "kafka", "brokers": []any{"a:9092"}, "sasl_password": "********"}
	if diff := cmp.Diff(want, back["sink"]); diff != "" {
		t.Errorf("effective sink mismatch (-want +got):\n%s", diff)
	}
}

func TestEncryptionKeys(t *testing.T) {
	key := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	c, err := Parse([]byte(doc("", `"encryption": {"enabled": true, "key_b64_env": "TOP", "rules": [{"subject": "a.>", "key_b64": "`+key+`"}, {"subject": "b.>"}]}`)), "t.json", testRegistry(), noEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	env := mapEnv(map[string]string{"TOP": "AAAA"})
	if _, _, err := c.Encryption.EncryptionKey(env); err == nil || err.Error() != "encryption.key_b64_env: must decode to exactly 32 bytes for AES-256" {
		t.Errorf("EncryptionKey(short) error = %v", err)
	}
	k, ok, err := c.Encryption.RuleKey(0, env)
	if err != nil || !ok || len(k) != 32 || k[31] != 31 {
		t.Errorf("RuleKey(0) = %v, %v, %v; want the rule's own key", k, ok, err)
	}
	if _, _, err := c.Encryption.RuleKey(1, noEnv); err == nil || err.Error() != "encryption.key_b64_env: environment variable TOP is not set" {
		t.Errorf("RuleKey(1) error = %v, want the inherited top-level env error", err)
	}
}

func TestSchema(t *testing.T) {
	out, err := Schema(map[string]any{"file": defaultTestFileSink(), "kafka": rawOpener{}})
	if err != nil {
		t.Fatalf("Schema: %v", err)
	}
	var root map[string]any
	if err := json.Unmarshal(out, &root); err != nil {
		t.Fatalf("Schema output is not JSON: %v", err)
	}
	if root["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", root["$schema"])
	}
	// Every object schema with properties forbids unknown keys.
	var walk func(path string, v any)
	count := 0
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, has := x["properties"]; has && !strings.HasSuffix(path, "sink.oneOf[1]") && !strings.HasSuffix(path, "sinks.additionalProperties.oneOf[1]") {
				count++
				if x["additionalProperties"] != false {
					t.Errorf("%s: additionalProperties = %v, want false", path, x["additionalProperties"])
				}
			}
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", root)
	if count < 15 {
		t.Errorf("only %d object schemas found", count)
	}
	props := root["properties"].(map[string]any)
	variants := props["sink"].(map[string]any)["oneOf"].([]any)
	fileType := variants[0].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["const"]
	if fileType != "file" {
		t.Errorf("sink.oneOf[0].properties.type.const = %v, want file", fileType)
	}
	if diff := cmp.Diff([]any{"nats", "sink"}, root["required"]); diff != "" {
		t.Errorf("required mismatch (-want +got):\n%s", diff)
	}
	bs := props["delivery"].(map[string]any)["properties"].(map[string]any)["batch_size"].(map[string]any)
	if bs["minimum"] != 1.0 || bs["maximum"] != 10000.0 || bs["default"] != 100.0 || bs["type"] != "integer" {
		t.Errorf("delivery.batch_size schema = %v", bs)
	}
}

// TestWeakEncryptionWarnings: settings in use that are accepted for
// compatibility but weak are warned about at the key that set them, once;
// settings no enabled rule uses, and the secure defaults, are not.
func TestWeakEncryptionWarnings(t *testing.T) {
	const key = `"key_b64": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="`
	for _, tt := range []struct {
		name, encryption string
		want             []string // warning paths
	}{
		{"defaults", `{"enabled": true, ` + key + `}`, nil},
		{"gcm 8", `{"enabled": true, "nonce_size_bytes": 8, ` + key + `}`, []string{"encryption.nonce_size_bytes"}},
		{"gcm 13", `{"enabled": true, "nonce_size_bytes": 13, ` + key + `}`, []string{"encryption.nonce_size_bytes"}},
		{"not in use", `{"enabled": false, "nonce_size_bytes": 8, ` + key + `}`, nil},
		{"ccm 13/16", `{"enabled": true, "algorithm": "aes-256-ccm", "nonce_size_bytes": 13, ` + key + `}`, nil},
		{"ccm 11 and tag 8", `{"enabled": true, "algorithm": "aes-256-ccm", "nonce_size_bytes": 11, "tag_length": 8, ` + key + `}`,
			[]string{"encryption.nonce_size_bytes", "encryption.tag_length"}},
		{"rule's own values", `{` + key + `, "rules": [{"subject": "a.>", "algorithm": "aes-256-ccm", "tag_length": 12}]}`,
			[]string{"encryption.rules[0].tag_length"}},
		{"inherited by two rules, named once", `{"nonce_size_bytes": 9, ` + key + `, "rules": [{"subject": "a.>"}, {"subject": "b.>"}]}`,
			[]string{"encryption.nonce_size_bytes"}},
		{"disabled rule", `{"nonce_size_bytes": 9, ` + key + `, "rules": [{"subject": "a.>", "enabled": false}]}`, nil},
		{"envelope v1 in use, warned once", `{"enabled": true, "envelope_version": 1, ` + key + `, "rules": [{"subject": "a.>"}]}`, []string{"encryption"}},
		{"envelope v1 in one rule", `{"enabled": true, "envelope_version": 2, ` + key + `, "rules": [{"subject": "a.>", "envelope_version": 1}]}`, []string{"encryption"}},
		{"envelope v1 not in use", `{"envelope_version": 1, ` + key + `}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.encryption
			if !strings.Contains(enc, "envelope_version") {
				// The other cases are about nonces and tags: keep the
				// envelope-version warning out of them.
				enc = `{"envelope_version": 2, ` + enc[1:]
			}
			doc := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "encryption": ` + enc +
				`, "sink": {"type": "file", "directory": "d"}}`
			c, err := Parse([]byte(doc), "test.json", testRegistry(), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings {
				path, _, _ := strings.Cut(w, ": ")
				got = append(got, path)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings %q (-want +got paths):\n%s", c.Warnings, diff)
			}
		})
	}
}

// warningSink is a sink configuration that reports a weak setting.
type warningSink struct{ rawOpener }

func (warningSink) Warnings() []sink.Problem {
	return []sink.Problem{{Path: "tls.verify", Message: "is off"}, {Path: "(root)", Message: "whole sink"}}
}

// TestSinkWarnings: a sink Config that implements sink.Warner has its
// warnings listed with sink. paths.
func TestSinkWarnings(t *testing.T) {
	r := sink.NewRegistry()
	r.Register("weak", func(json.RawMessage) (sink.Opener, error) { return warningSink{}, nil })
	c, err := Parse([]byte(`{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": {"type": "weak"}}`), "test.json", r, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sink.tls.verify: is off", "sink: whole sink"}, c.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
