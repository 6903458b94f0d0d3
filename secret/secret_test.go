package secret_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestValueNeverPrints: every ordinary way of printing a Value, directly or
// inside a struct, shows the mask; only Reveal returns the secret.
func TestValueNeverPrints(t *testing.T) {
	s := secret.Value("hunter2")
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secret", s)
	var loggedJSON strings.Builder
	slog.New(slog.NewJSONHandler(&loggedJSON, nil)).Info("x", "secret", s, "p", &s)
	js, _ := json.Marshal(struct{ P secret.Value }{s})
	type holder struct{ Password *secret.Value }
	for _, got := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %s %q %x %#v %+v", s, s, s, s, s, s),
		fmt.Sprintf("%v %+v", holder{&s}, &holder{&s}), fmt.Sprintf("%#v", holder{&s}),
		logged.String(), loggedJSON.String(), string(js),
	} {
		if strings.Contains(got, "hunter2") || strings.Contains(got, fmt.Sprintf("%x", "hunter2")) {
			t.Errorf("secret printed: %q", got)
		}
	}
	if s.Reveal() != "hunter2" {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	value := secret.Value("inline")
	envName, missing, missingFile := "PW_VAR", "NOPE", filepath.Join(dir, "absent")
	env := func(name string) (string, bool) {
		if name == "PW_VAR" {
			return "from-env", true
		}
		return "", false
	}
	for _, tt := range []struct {
		name      string
		v         *secret.Value
		e, f      *string
		want      string
		wantOK    bool
		wantError string
	}{
		{"none", nil, nil, nil, "", false, ""},
		{"inline", &value, nil, nil, "inline", true, ""},
		{"env", nil, &envName, nil, "from-env", true, ""},
		{"file loses one line ending", nil, nil, &file, "from-file", true, ""},
		{"env missing", nil, &missing, nil, "", false, "nats.password_env: environment variable NOPE is not set"},
		{"file missing", nil, nil, &missingFile, "", false, "nats.password_file: cannot read secret file: open " + missingFile + ": no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := secret.Resolve("nats.password", tt.v, tt.e, tt.f, env)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				if !errors.Is(err, sink.ErrConfig) {
					t.Errorf("Resolve error %q is not a sink.ErrConfig", err)
				}
				if _, ok := errors.AsType[*sink.ConfigError](err); !ok {
					t.Errorf("Resolve error %T, want *sink.ConfigError", err)
				}
			}
			if got.Reveal() != tt.want || ok != tt.wantOK || gotErr != tt.wantError {
				t.Errorf("Resolve = %q, %v, %q; want %q, %v, %q", got.Reveal(), ok, gotErr, tt.want, tt.wantOK, tt.wantError)
			}
		})
	}
}
