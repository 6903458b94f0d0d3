package file

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestDecode(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	withDefaults := func(f func(*Config)) Config {
		c := Default()
		c.Directory = "out"
		c.Extension = ".json"
		f(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		raw  string
		want Config
	}{
		{"defaults", `{"type":"file","directory":"out"}`, withDefaults(func(*Config) {})},
		{"type is trimmed and lower-cased", `{"type":" File ","directory":"out"}`, withDefaults(func(*Config) {})},
		{"gzip derives .json.gz", `{"type":"file","directory":"out","compression":"gzip"}`,
			withDefaults(func(c *Config) { c.Compression, c.Extension = "gzip", ".json.gz" })},
		{"gzip keeps an explicit extension", `{"type":"file","directory":"out","compression":"gzip","extension":".json"}`,
			withDefaults(func(c *Config) { c.Compression, c.ExtensionSet = "gzip", true })},
		{"tilde expands", `{"type":"file","directory":"~/events"}`,
			withDefaults(func(c *Config) { c.Directory = "/home/tester/events" })},
		{"bare tilde", `{"type":"file","directory":"~"}`,
			withDefaults(func(c *Config) { c.Directory = "/home/tester" })},
		{"every option", `{"type":"file","directory":"d","mode":"one_file_per_message","filename_strategy":"message_id",
			"duplicate_policy":"overwrite","payload_mode":"json_only","extension":".rec","compression":"gzip",
			"compression_level":"9","include_metadata":false,"partition_by_subject":"no","create_directory":0,
			"fsync":false,"pretty":true}`,
			Config{Type: "file", Directory: "d", Mode: "one_file_per_message", FilenameStrategy: "message_id",
				DuplicatePolicy: "overwrite", PayloadMode: "json_only", Extension: ".rec", Compression: "gzip",
				CompressionLevel: 9, Pretty: true, ExtensionSet: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Decode(json.RawMessage(tt.raw))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tt.want, o); diff != "" {
				t.Errorf("Decode(%s) mismatch (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
}

func TestDecodeProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  string
		want []sink.Problem
	}{
		{"directory required", `{"type":"file"}`, []sink.Problem{{Path: "directory", Message: "required"}}},
		{"directory blank", `{"type":"file","directory":"  "}`, []sink.Problem{{Path: "directory", Message: "must not be empty"}}},
		{"every enum and range, in schema order", `{"type":"file","directory":"d","pretty":"maybe","mode":"x",
			"filename_strategy":"uuid","duplicate_policy":"replace","payload_mode":"raw","compression":"zstd",
			"compression_level":10}`, []sink.Problem{
			{Path: "mode", Message: `must be one of one_file_per_message (got "x")`},
			{Path: "filename_strategy", Message: `must be one of stream_sequence, message_id, payload_sha256 (got "uuid")`},
			{Path: "duplicate_policy", Message: `must be one of skip_existing, overwrite, fail (got "replace")`},
			{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "raw")`},
			{Path: "compression", Message: `must be one of none, gzip (got "zstd")`},
			{Path: "compression_level", Message: "must be between 1 and 9 (got 10)"},
			{Path: "pretty", Message: "expected boolean (got string)"},
		}},
		{"level 0", `{"type":"file","directory":"d","compression_level":0}`,
			[]sink.Problem{{Path: "compression_level", Message: "must be between 1 and 9 (got 0)"}}},
		{"extension without dot", `{"type":"file","directory":"d","extension":"json"}`,
			[]sink.Problem{{Path: "extension", Message: `must start with "." (got "json")`}}},
		{"extension empty", `{"type":"file","directory":"d","extension":""}`,
			[]sink.Problem{{Path: "extension", Message: `must start with "." (got "")`}}},
		{"extension dot", `{"type":"file","directory":"d","extension":"."}`,
			[]sink.Problem{{Path: "extension", Message: `must not be "." or ".." (got ".")`}}},
		{"extension dotdot", `{"type":"file","directory":"d","extension":".."}`,
			[]sink.Problem{{Path: "extension", Message: `must not be "." or ".." (got "..")`}}},
		{"extension slash", `{"type":"file","directory":"d","extension":".a/b"}`,
			[]sink.Problem{{Path: "extension", Message: `must not contain "/" or "\" (got ".a/b")`}}},
		{"extension backslash", `{"type":"file","directory":"d","extension":".a\\b"}`,
			[]sink.Problem{{Path: "extension", Message: `must not contain "/" or "\" (got ".a\\b")`}}},
		{"unknown key", `{"type":"file","directory":"d","fsyn":true}`,
			[]sink.Problem{{Path: "fsyn", Message: `unknown key (did you mean "fsync")`}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(json.RawMessage(tt.raw))
			var ce *sink.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Decode(%s) = %v, want *sink.ConfigError", tt.raw, err)
			}
			if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewStartRules(t *testing.T) {
	t.Run("root is a file", func(t *testing.T) {
		c := config(t)
		os.WriteFile(c.Directory, nil, 0o600)
		_, err := New(t.Context(), c, sink.Deps{})
		assertConfigError(t, err, "directory")
	})
	t.Run("missing and create_directory false", func(t *testing.T) {
		c := config(t)
		c.CreateDirectory = false
		_, err := New(t.Context(), c, sink.Deps{})
		assertConfigError(t, err, "directory")
		if _, err := os.Stat(c.Directory); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Stat(%s) = %v, want not exist", c.Directory, err)
		}
	})
	t.Run("parent is a file", func(t *testing.T) {
		c := config(t)
		os.WriteFile(c.Directory, nil, 0o600)
		c.Directory = filepath.Join(c.Directory, "sub")
		_, err := New(t.Context(), c, sink.Deps{})
		assertConfigError(t, err, "directory")
	})
	t.Run("missing is created with parents", func(t *testing.T) {
		c := config(t)
		c.Directory = filepath.Join(c.Directory, "a", "b")
		s := open(t, c)
		if st, err := os.Stat(c.Directory); err != nil || !st.IsDir() {
			t.Fatalf("Stat(%s) = %v, want a directory", c.Directory, err)
		}
		if s.Root() != c.Directory {
			t.Errorf("Root() = %s, want %s", s.Root(), c.Directory)
		}
	})
	t.Run("tilde", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("HOME", home)
		c := Default()
		c.Directory = "~/events"
		s := open(t, c)
		if want := filepath.Join(home, "events"); s.Root() != want {
			t.Errorf("Root() = %s, want %s", s.Root(), want)
		}
		rs := s.WriteBatch(t.Context(), []*sink.Envelope{env("a", 1, "", "{}")})
		if rs[0].Outcome != sink.Committed {
			t.Fatalf("WriteBatch = %+v", rs)
		}
		if _, err := os.Stat(filepath.Join(home, "events", "a", "ORDERS-00000000000000000001.json")); err != nil {
			t.Error(err)
		}
	})
}

// TestGoBuiltValidatedLikeLoaded: a Config built in Go gets the problems,
// paths and messages a configuration file with the same values gets, from
// Validate and from New.
func TestGoBuiltValidatedLikeLoaded(t *testing.T) {
	for _, tt := range []struct {
		name string
		json string // keys after "type" and "directory"
		set  func(*Config)
		want []sink.Problem
	}{
		{"enum", `"duplicate_policy":"nope","extension":"x"`, func(c *Config) { c.DuplicatePolicy, c.Extension = "nope", "x" },
			[]sink.Problem{{Path: "duplicate_policy", Message: `must be one of skip_existing, overwrite, fail (got "nope")`}}},
		{"cross-key rule", `"extension":"x"`, func(c *Config) { c.Extension = "x" },
			[]sink.Problem{{Path: "extension", Message: `must start with "." (got "x")`}}},
		{"range", `"compression_level":0`, func(c *Config) { c.CompressionLevel = 0 },
			[]sink.Problem{{Path: "compression_level", Message: "must be between 1 and 9 (got 0)"}}},
		{"payload mode", `"payload_mode":"xml"`, func(c *Config) { c.PayloadMode = "xml" },
			[]sink.Problem{{Path: "payload_mode", Message: `must be one of json_or_envelope, json_only, text_envelope, bytes_envelope (got "xml")`}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			_, err := Decode(json.RawMessage(`{"type":"file","directory":"` + dir + `",` + tt.json + `}`))
			loaded := problems(t, "Decode", err)
			c := Default()
			c.Directory = dir
			tt.set(&c)
			validated := problems(t, "Validate", c.Validate())
			_, err = New(t.Context(), c, sink.Deps{})
			opened := problems(t, "New", err)
			for name, got := range map[string][]sink.Problem{"Decode": loaded, "Validate": validated, "New": opened} {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s problems (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// problems returns the problems of a *sink.ConfigError.
func problems(t *testing.T, what string, err error) []sink.Problem {
	t.Helper()
	ce, ok := errors.AsType[*sink.ConfigError](err)
	if !ok {
		t.Fatalf("%s = %v, want a *sink.ConfigError", what, err)
	}
	if !errors.Is(err, sink.ErrConfig) {
		t.Errorf("%s error is not a sink.ErrConfig", what)
	}
	return ce.Problems
}

func assertConfigError(t *testing.T, err error, path string) {
	t.Helper()
	var ce *sink.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != path {
		t.Fatalf("New = %v, want one *sink.ConfigError problem at %q", err, path)
	}
}
