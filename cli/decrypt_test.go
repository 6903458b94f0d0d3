package cli_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/cli"
	"github.com/nats-sinks/nats-sink/internal/seal"
)

// TestDecryptOutputFile: --output creates the plaintext file with mode
// 0600, truncates an existing regular file and makes it 0600 (it used to
// keep the old, wider mode), and refuses a symlink (it used to follow it and
// write wherever it pointed).
func TestDecryptOutputFile(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	env, err := seal.Encrypt([]byte("top secret plaintext"), seal.Settings{Algorithm: "aes-256-gcm", KeyID: "k", Key: key, NonceSize: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	if err := os.WriteFile(in, env, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(out string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Run([]string{"decrypt", in, "--output", out}, &cli.Env{Stdout: &stdout, Stderr: &stderr,
			Getenv: func(name string) (string, bool) {
				if name == "NATS_SINKS_PAYLOAD_KEY_B64" {
					return base64.StdEncoding.EncodeToString(key), true
				}
				return "", false
			}})
		return code, stderr.String()
	}
	mode := func(p string) os.FileMode {
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode()
	}

	fresh := filepath.Join(dir, "fresh.txt")
	if code, stderr := run(fresh); code != 0 {
		t.Fatalf("decrypt to a new file: exit %d: %s", code, stderr)
	}
	if m := mode(fresh).Perm(); m != 0o600 {
		t.Errorf("new output file mode = %v, want 0600", m)
	}

	existing := filepath.Join(dir, "existing.txt")
	if err := os.WriteFile(existing, []byte(strings.Repeat("old content that is longer ", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(existing, 0o644) // whatever the umask
	if code, stderr := run(existing); code != 0 {
		t.Fatalf("decrypt over an existing file: exit %d: %s", code, stderr)
	}
	if m := mode(existing).Perm(); m != 0o600 {
		t.Errorf("existing output file mode = %v after decrypt, want 0600", m)
	}
	if got, _ := os.ReadFile(existing); string(got) != "top secret plaintext" {
		t.Errorf("existing output file holds %q, want the plaintext alone", got)
	}

	target := filepath.Join(dir, "target.txt")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	code, stderr := run(link)
	if code == 0 {
		t.Errorf("decrypt to a symlink succeeded, want a refusal")
	}
	if strings.Contains(stderr, "top secret") {
		t.Errorf("stderr shows the plaintext: %s", stderr)
	}
	if got, _ := os.ReadFile(target); string(got) != "untouched" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if mode(link)&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
}

// TestDecryptEnvelopeV2: decrypt reads version 2 envelopes (a stored file
// record holding one, too), and an edited key_id or subject makes it fail.
func TestDecryptEnvelopeV2(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	env, err := seal.EncryptMessage([]byte(`{"approved":true}`), seal.Settings{Algorithm: "aes-256-gcm", KeyID: "k", Key: key, NonceSize: 12, EnvelopeVersion: 2},
		seal.Message{Subject: "orders.created", Stream: "ORDERS", Sequence: 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := []byte(`{"payload":` + string(env) + `,"subject":"orders.created"}`)
	run := func(doc []byte) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Run([]string{"decrypt"}, &cli.Env{Stdin: bytes.NewReader(doc), Stdout: &stdout, Stderr: &stderr,
			Getenv: func(name string) (string, bool) {
				if name == "NATS_SINKS_PAYLOAD_KEY_B64" {
					return base64.StdEncoding.EncodeToString(key), true
				}
				return "", false
			}})
		return code, stdout.String(), stderr.String()
	}
	for _, doc := range [][]byte{env, record} {
		if code, out, stderr := run(doc); code != 0 || out != `{"approved":true}` {
			t.Errorf("decrypt v2: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	}
	for _, edit := range [][2]string{{`"key_id":"k"`, `"key_id":"k2"`}, {`"subject":"orders.created"`, `"subject":"orders.cancelled"`}} {
		doc := bytes.Replace(env, []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(doc, env) {
			t.Fatalf("%s not in the envelope", edit[0])
		}
		if code, out, stderr := run(doc); code == 0 || out != "" || !strings.Contains(stderr, "encrypted payload could not be decrypted") {
			t.Errorf("decrypt with %s: exit %d, stdout %q, stderr %q", edit[1], code, out, stderr)
		}
	}
}
