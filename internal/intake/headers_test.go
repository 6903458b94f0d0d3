package intake

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestValidUTF8Vectors compares with CPython's bytes.decode("utf-8",
// "replace") on random byte strings built from the boundary bytes of the
// UTF-8 table.
func TestValidUTF8Vectors(t *testing.T) {
	data, err := os.ReadFile("testdata/utf8_replace.txt")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		inHex, wantHex, _ := strings.Cut(line, " ")
		in, err1 := hex.DecodeString(inHex)
		want, err2 := hex.DecodeString(wantHex)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad vector %q", line)
		}
		if got := ValidUTF8(string(in)); got != string(want) {
			t.Errorf("ValidUTF8(%x) = %x, want %x", in, got, want)
		}
		n++
	}
	if n < 500 {
		t.Fatalf("only %d vectors", n)
	}
}

func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "a", "\xe2\x82", "\xf0\x9f\x98", "\xff", "café", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ValidUTF8(s)
		if !utf8.ValidString(got) {
			t.Fatalf("ValidUTF8(%q) = %q is not valid UTF-8", s, got)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("ValidUTF8 changed valid %q to %q", s, got)
		}
		// Each U+FFFD replaces at least one byte and at most three.
		repl := strings.Count(got, "\ufffd") - strings.Count(s, "\ufffd")
		if removed := len(s) - (len(got) - 3*repl); removed < repl || removed > 3*repl {
			t.Fatalf("ValidUTF8(%q): %d replacements for %d invalid bytes", s, repl, removed)
		}
	})
}
