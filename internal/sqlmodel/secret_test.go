package sqlmodel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestResolveSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none")
	env := func(name string) (string, bool) {
		if name == "PW" {
			return "from-env", true
		}
		return "", false
	}
	value := secret.Value("from-value")
	str := func(s string) *string { return &s }
	for _, tt := range []struct {
		name            string
		value           *secret.Value
		env, file       *string
		wantV, wantFrom string
		wantProblem     sink.Problem
	}{
		{name: "none"},
		{name: "value", value: &value, wantV: "from-value", wantFrom: "password"},
		{name: "env", env: str("PW"), wantV: "from-env", wantFrom: "password_env"},
		{name: "file loses one line ending", file: &file, wantV: "from-file", wantFrom: "password_file"},
		{name: "env unset", env: str("UNSET"),
			wantProblem: sink.Problem{Path: "password_env", Message: "environment variable UNSET is not set"}},
		{name: "file missing", file: &missing,
			wantProblem: sink.Problem{Path: "password_file", Message: "cannot read secret file: open " + missing + ": no such file or directory"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, from, err := ResolveSecret("password", tt.value, tt.env, tt.file, env)
			if tt.wantProblem.Path == "" {
				if err != nil || v != tt.wantV || from != tt.wantFrom {
					t.Errorf("ResolveSecret = %q, %q, %v; want %q, %q, nil", v, from, err, tt.wantV, tt.wantFrom)
				}
				return
			}
			ce, ok := errors.AsType[*sink.ConfigError](err)
			if !ok {
				t.Fatalf("ResolveSecret error = %v (%T), want *sink.ConfigError", err, err)
			}
			if diff := cmp.Diff([]sink.Problem{tt.wantProblem}, ce.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretProblems(t *testing.T) {
	value := secret.Value("x")
	good := "PW"
	for _, tt := range []struct {
		name      string
		required  bool
		value     *secret.Value
		env, file *string
		want      []sink.Problem
	}{
		{name: "none, optional"},
		{name: "none, required", required: true,
			want: []sink.Problem{{Path: "wallet_password", Message: "one of wallet_password, wallet_password_env, wallet_password_file is required"}}},
		{name: "one", required: true, env: &good},
		{name: "two", value: &value, env: &good, want: []sink.Problem{
			{Path: "wallet_password", Message: "set only one of wallet_password, wallet_password_env, wallet_password_file"},
		}},
		{name: "three", required: true, value: &value, env: &good, file: &good, want: []sink.Problem{
			{Path: "wallet_password", Message: "set only one of wallet_password, wallet_password_env, wallet_password_file"},
		}},
	} {
		got := SecretProblems("wallet_password", tt.required, tt.value, tt.env, tt.file)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: SecretProblems (-want +got):\n%s", tt.name, diff)
		}
	}
}
