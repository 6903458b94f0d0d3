package jsonx_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// The files in testdata are the Python project's output, kept byte for byte
// as normative golden data (docs/formats.md shows them), so this package's
// tests depend on nothing outside the repository:
//
//	payload_envelopes.ascii.jsonl    docs/formats.md#payload-normalisation, the three payload envelopes
//	encryption_envelopes.ascii.jsonl docs/formats.md#encryption-envelope, the three encryption test vectors
//	dlq_bodies.ascii.jsonl           docs/formats.md#dlq-body, the two DLQ bodies
//	file_record.pretty.json          docs/formats.md#file-records, the pretty file record
func TestGoldenASCIICompact(t *testing.T) {
	for _, file := range []string{
		"payload_envelopes.ascii.jsonl",
		"encryption_envelopes.ascii.jsonl",
		"dlq_bodies.ascii.jsonl",
	} {
		lines := bytes.Split(bytes.TrimSuffix(readTestdata(t, file), []byte("\n")), []byte("\n"))
		if len(lines) < 2 {
			t.Fatalf("%s: %d lines, want at least 2", file, len(lines))
		}
		for i, line := range lines {
			v, err := jsonx.Parse(line)
			if err != nil {
				t.Errorf("%s:%d: Parse: %v", file, i+1, err)
				continue
			}
			if got := jsonx.Marshal(v, jsonx.ASCII); !bytes.Equal(got, line) {
				t.Errorf("%s:%d: re-encoded\n got %s\nwant %s", file, i+1, got, line)
			}
		}
	}
}

func TestGoldenFileRecordPretty(t *testing.T) {
	pretty := bytes.TrimSuffix(readTestdata(t, "file_record.pretty.json"), []byte("\n"))
	// "The compact form is the same document with all whitespace outside
	// strings removed."
	compact := stripSpaceOutsideStrings(pretty)
	if !bytes.Contains(compact, []byte(`"note":"café"`)) {
		t.Fatalf("compact golden lacks the utf8 payload note: %s", compact)
	}
	for _, src := range [][]byte{pretty, compact} {
		v, err := jsonx.Parse(src)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := jsonx.MarshalPretty(v, jsonx.UTF8); !bytes.Equal(got, pretty) {
			t.Errorf("MarshalPretty =\n%s\nwant\n%s", got, pretty)
		}
		if got := jsonx.Marshal(v, jsonx.UTF8); !bytes.Equal(got, compact) {
			t.Errorf("Marshal =\n%s\nwant\n%s", got, compact)
		}
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stripSpaceOutsideStrings removes JSON whitespace that is not inside a
// string literal.
func stripSpaceOutsideStrings(src []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for _, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			continue
		}
		out = append(out, c)
	}
	return out
}
