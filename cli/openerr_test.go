package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/cli"
)

// TestOpenConfigErrorNamesTheKey: a configuration problem found while the
// sink opens (here an unset password variable) is reported like a loaded
// configuration's problems, with its JSON path from the document root and
// nothing in front, and exits 2, for run and for test-sink. Neither needs a
// server: the secret is resolved before any connection.
func TestOpenConfigErrorNamesTheKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	doc := `{"nats": {"url": "nats://127.0.0.1:1", "stream": "S", "consumer": "c", "subject": "s.>"},
 "sink": {"type": "postgres", "host": "127.0.0.1", "port": 1, "database": "d", "user": "u", "password_env": "NATS_SINK_TEST_UNSET_PW"}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "Configuration error: sink.password_env: environment variable NATS_SINK_TEST_UNSET_PW is not set\n"
	for _, cmd := range []string{"run", "test-sink"} {
		t.Run(cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Run([]string{cmd, cfg}, &cli.Env{Stdout: &stdout, Stderr: &stderr,
				Getenv: func(string) (string, bool) { return "", false }})
			if code != 2 {
				t.Errorf("%s exit code = %d, want 2\nstderr: %s", cmd, code, stderr.String())
			}
			var line string
			for l := range strings.Lines(stderr.String()) {
				if strings.HasPrefix(l, "Configuration error: ") {
					line = l
				}
			}
			if line != want {
				t.Errorf("%s stderr line = %q, want %q\nstderr: %s", cmd, line, want, stderr.String())
			}
		})
	}
}

// TestOpenConfigErrorsListed: several problems found while opening are
// listed like the loader lists them, each with its path.
func TestOpenConfigErrorsListed(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	doc := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"},
 "sink": {"type": "http", "url": "https://hooks.example/in", "headers_env": {"Authorization": "NS_UNSET_A", "X-Key": "NS_UNSET_B"}}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"test-sink", cfg}, &cli.Env{Stdout: &stdout, Stderr: &stderr,
		Getenv: func(string) (string, bool) { return "", false }})
	want := "Configuration error: 2 problems in the sink settings\n" +
		"  sink.headers_env.Authorization: environment variable NS_UNSET_A is not set\n" +
		"  sink.headers_env.X-Key: environment variable NS_UNSET_B is not set\n"
	if code != 2 || stderr.String() != want {
		t.Errorf("test-sink = %d, stderr %q; want 2, %q", code, stderr.String(), want)
	}
}
