package intake

import (
	"strings"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/sink"
)

// NormaliseHeaders applies docs/formats.md#metadata-document: last value per name, names and
// values trimmed of ASCII whitespace, invalid names dropped, invalid UTF-8 in
// values replaced by U+FFFD per maximal subpart. The result is never nil.
//
// Two raw names that become equal after trimming (" A" and "A") were one
// header for upstream, which kept the last in wire order; Go's map keeps no
// order between them, so the raw name that needs no trimming wins, else the
// byte-wise greatest raw name: a deterministic choice where the map is not.
func NormaliseHeaders(h map[string][]string) sink.Headers {
	out := make(sink.Headers, len(h))
	var winner map[string]string // normalised name -> raw name; only when trimming changed a name
	for raw, values := range h {
		if len(values) == 0 {
			continue
		}
		name := trimASCII(raw)
		if !validName(name) {
			continue
		}
		if len(name) != len(raw) || winner != nil {
			if winner == nil {
				winner = collisionWinners(h)
			}
			if winner[name] != raw {
				continue
			}
		}
		out[name] = ValidUTF8(trimASCII(values[len(values)-1]))
	}
	return out
}

// collisionWinners picks, for every normalised name, the raw name whose value
// NormaliseHeaders keeps (see there).
func collisionWinners(h map[string][]string) map[string]string {
	w := make(map[string]string, len(h))
	for raw, values := range h {
		if len(values) == 0 {
			continue
		}
		name := trimASCII(raw)
		prev, seen := w[name]
		switch {
		case !seen, raw == name:
			w[name] = raw
		case prev != name && raw > prev:
			w[name] = raw
		}
	}
	return w
}

// isASCIISpace matches the bytes Python's bytes.strip() removes, which is
// what upstream's client applied: space, TAB, LF, VT, FF, CR.
func isASCIISpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

func trimASCII(s string) string {
	i, j := 0, len(s)
	for i < j && isASCIISpace(s[i]) {
		i++
	}
	for j > i && isASCIISpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

// validName rejects empty names and names with non-ASCII bytes, whitespace,
// controls or DEL: only printable ASCII other than space remains.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// ValidUTF8 returns s with each maximal subpart of an ill-formed UTF-8
// sequence replaced by one U+FFFD (Unicode docs/delivery.md#fetching-and-in-flight-batches, "U+FFFD Substitution of
// Maximal Subparts"), as Python's decoder with errors="replace" does. Go's
// strings.ToValidUTF8 replaces whole runs and a range loop replaces every
// byte, so neither matches: e2 82 41 is "\uFFFDA" here. s is returned
// unchanged, without copying, when it is valid.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		if _, size := utf8.DecodeRuneInString(s[i:]); size > 1 {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		i += maximalSubpart(s[i:])
		b.WriteString("\uFFFD")
	}
	return b.String()
}

// maximalSubpart returns the length (≥ 1) of the maximal subpart starting at
// s[0], which does not begin a well-formed sequence: the longest prefix that
// is still the start of some well-formed sequence (Unicode Table 3-7), or one
// byte when s[0] cannot start one at all.
func maximalSubpart(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf) // allowed range of the second byte
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default: // 80..c1, f5..ff: never a lead byte
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if k == 0 && (b < lo || b > hi) || k > 0 && (b < 0x80 || b > 0xbf) {
			break
		}
		n++
	}
	return n
}
