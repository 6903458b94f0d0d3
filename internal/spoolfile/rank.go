package spoolfile

import (
	"strings"
	"unicode"

	"github.com/nats-sinks/nats-sink/metadata"
)

// Priority ranks: lower drains first. Unknown and null priorities rank
// between routine and low.
var ranks = map[string]int{
	"flash":     0,
	"immediate": 1,
	"urgent":    2,
	"high":      3,
	"routine":   5,
	"normal":    5,
	"medium":    5,
	"low":       7,
	"deferred":  9,
}

// UnknownRank is the rank of a null or unrecognised priority.
const UnknownRank = 6

// Rank returns the drain rank of a priority: trimmed of Unicode white space
// (Python's str.strip) and fully case-folded (Python's str.casefold, so the
// ligature "ﬂash" is "flash"), then looked up; "" and unknown values are
// UnknownRank.
func Rank(priority string) int {
	if r, ok := ranks[caseFold(metadata.TrimSpace(priority))]; ok {
		return r
	}
	return UnknownRank
}

// caseFold is Unicode full case folding as far as it matters here: the
// result is only compared with ASCII words, so a rune whose folding is not
// pure ASCII can never match and may be folded simply. The runes whose full
// folding (CaseFolding.txt, status C and F) is ASCII but not their
// lower-case form are listed; every other rune folds to unicode.ToLower,
// which agrees with status C for all of them (Kelvin sign K → k included).
func caseFold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch r {
		case 'ß', 'ẞ':
			b.WriteString("ss")
		case 'ſ':
			b.WriteByte('s')
		case 'ﬀ':
			b.WriteString("ff")
		case 'ﬁ':
			b.WriteString("fi")
		case 'ﬂ':
			b.WriteString("fl")
		case 'ﬃ':
			b.WriteString("ffi")
		case 'ﬄ':
			b.WriteString("ffl")
		case 'ﬅ', 'ﬆ':
			b.WriteString("st")
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
