package cli_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/cli"
)

// The marker secret: every secret-bearing place of the configurations
// below holds it (or the key whose base64 text is markerKey), and every
// environment variable a configuration names resolves to it.
const marker = "MrkR-s3cret-9Q7x"

var markerKey = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef" + marker)) // 32 bytes

// markerConfigs returns configurations that put the marker in every kind
// of place a secret can sit: inline passwords and tokens, URL and DSN
// user-info, header maps, webhook URL paths, encryption keys, the sink's
// connection object, named sinks, and (through the environment) every
// *_env key. None of the servers exists: 127.0.0.1:1 refuses at once.
func markerConfigs() map[string]string {
	const src = `"stream": "S", "consumer": "c", "subject": "s.>"`
	m := marker
	return map[string]string{
		"nats-password-websocket-postgres": `{"nats": {"urls": ["ws://127.0.0.1:1"], "user": "alice", "password": "` + m + `",
			"websocket_headers": {"X-Tenant": "` + m + `"}, ` + src + `},
		  "encryption": {"enabled": true, "key_id": "k1", "key_b64": "` + markerKey + `"},
		  "sink": {"type": "postgres", "host": "127.0.0.1", "port": 1, "database": "d", "user": "u", "password": "` + m + `"}}`,
		"nats-url-userinfo-http-path": `{"nats": {"url": "nats://alice:` + m + `@127.0.0.1:1", ` + src + `},
		  "sink": {"type": "http", "url": "https://hooks.example.com/services/` + m + `", "headers": {"X-Custom": "` + m + `"}}}`,
		"nats-url-list": `{"nats": {"url": "nats://127.0.0.1:1,nats://bob:` + m + `@127.0.0.1:2", ` + src + `},
		  "sink": {"type": "file", "directory": "out"}}`,
		"env-everything": `{"nats": {"url": "nats://127.0.0.1:1", "token_env": "NATS_TOKEN_VAR", ` + src + `},
		  "encryption": {"enabled": true, "key_id": "k1", "key_b64_env": "KEY_VAR"},
		  "sink": {"type": "mysql", "host": "127.0.0.1", "port": 1, "database": "d", "user": "u", "password_env": "MYSQL_PW_VAR"}}`,
		"oracle-dsn": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "oracle", "user": "bob", "dsn": "bob/` + m + `@127.0.0.1:1/x"}}`,
		"oracle-password": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "oracle", "dsn": "127.0.0.1:1/x", "user": "bob", "password": "` + m + `",
		           "wallet_location": "/nonexistent/wallet", "wallet_password": "` + m + `"}}`,
		"redis": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "redis", "address": "127.0.0.1:1", "password": "` + m + `"}}`,
		"rabbitmq-url": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "rabbitmq", "url": "amqp://guest:` + m + `@127.0.0.1:1/", "exchange": "x"}}`,
		"rabbitmq-password": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "rabbitmq", "url": "amqp://127.0.0.1:1/", "exchange": "x", "username": "guest", "password": "` + m + `"}}`,
		"mqtt": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "mqtt", "url": "mqtt://127.0.0.1:1", "username": "u", "password": "` + m + `"}}`,
		"clickhouse": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "clickhouse", "url": "http://127.0.0.1:1", "database": "d", "table": "t", "password": "` + m + `"}}`,
		"republish-connection": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "nats", "subject_prefix": "copy", "connection": {"urls": ["ws://127.0.0.1:1"], "user": "u", "password": "` + m + `",
		           "websocket_headers": {"X-Tenant": "` + m + `"}}}}`,
		"kafka-sasl": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "kafka", "brokers": ["127.0.0.1:1"], "topic": "t", "sasl": {"mechanism": "plain", "username": "u", "password_env": "KAFKA_PW_VAR"}}}`,
		"s3-keys": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "s3", "bucket": "bucket-1", "credential_mode": "environment", "allow_http_for_local_testing": true, "endpoint_url": "http://127.0.0.1:1", "aws_access_key_id_env": "AK_VAR", "aws_secret_access_key_env": "SK_VAR"}}`,
		"named-sinks": `{"nats": {"url": "nats://127.0.0.1:1", ` + src + `},
		  "sink": {"type": "fanout"},
		  "sinks": {"db": {"type": "postgres", "host": "127.0.0.1", "port": 1, "database": "d", "user": "u", "password": "` + m + `"},
		            "hook": {"type": "http", "url": "https://hooks.example.com/` + m + `", "headers": {"X-Custom": "` + m + `"}}},
		  "routing": {"enabled": true, "routes": [{"name": "all", "match": {"subject": "s.>"}, "targets": ["db", "hook"]}]}}`,
	}
}

// TestSecretMarkerNeverPrinted runs every command that reads a
// configuration over each marker configuration and checks that neither
// standard output nor standard error ever contains the secret, whatever
// the command makes of the configuration (valid, refused, unreachable).
func TestSecretMarkerNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	env := func(name string) (string, bool) {
		switch {
		case name == "KEY_VAR":
			return markerKey, true
		case strings.HasSuffix(name, "_VAR"): // every variable a configuration names
			return marker, true
		}
		return "", false // no NATS_SINKS_* overrides
	}
	commands := [][]string{
		{"validate"},
		{"show-effective-config"},
		{"test-sink"},
		{"test-sink", "--dry-run"},
		{"run", "--dry-run"},
		{"run"},
		{"status", "--skip-sink"},
		{"status"},
		{"dlq", "list"},
		{"replay", "--from-seq", "1", "--to-seq", "2"},
	}
	for name, doc := range markerConfigs() {
		cfg := filepath.Join(dir, name+".json")
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		validated, validateOut := false, ""
		for _, c := range commands {
			args := append([]string{}, c[:1]...)
			if c[0] == "dlq" {
				args = append(args, c[1])
				args = append(args, cfg)
			} else {
				args = append(args, cfg)
				args = append(args, c[1:]...)
			}
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			go func() {
				done <- cli.Run(args, &cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: env, Stdin: strings.NewReader(""),
					Signals: func(parent context.Context) (context.Context, context.CancelFunc) {
						// run stops at this "signal" after 5 s: long enough to
						// connect, fail and log.
						sctx, scancel := context.WithCancel(parent)
						go func() { <-ctx.Done(); scancel() }()
						return sctx, scancel
					}})
			}()
			var code int
			select {
			case code = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s: %v did not return within 2 minutes", name, args)
			}
			cancel()
			if c[0] == "validate" {
				validated, validateOut = code == 0, stderr.String()
			}
			out := stdout.String() + stderr.String()
			for _, secret := range []string{marker, markerKey} {
				if strings.Contains(out, secret) {
					t.Errorf("%s: nats-sink %s (exit %d) printed the secret:\n%s", name, strings.Join(c, " "), code, out)
				}
			}
		}
		// A configuration refused at once would test the loader only.
		refusedOnPurpose := name == "nats-url-userinfo-http-path" || name == "nats-url-list" || name == "rabbitmq-url" || name == "oracle-dsn"
		if !validated && !refusedOnPurpose {
			t.Errorf("%s: validate refused the configuration; the other commands tested nothing past it:\n%s", name, validateOut)
		}
	}
}
