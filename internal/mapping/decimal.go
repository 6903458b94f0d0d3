package mapping

import (
	"math"
	"strconv"
	"strings"
)

// decimal is the exact value of a JSON number token: coef × 10^exp, with
// coef's digits free of leading and trailing zeros ("" for zero).
type decimal struct {
	neg  bool
	coef string
	exp  int
}

// maxExp bounds the exponent kept from a token: anything beyond is out of
// every range (or, negative, a fraction) and only must not overflow int.
const maxExp = 1 << 30

// isNumberLiteral reports whether s is exactly a JSON number token:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumberLiteral(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parseDecimal converts a token that isNumberLiteral accepts.
func parseDecimal(tok string) decimal {
	var d decimal
	if strings.HasPrefix(tok, "-") {
		d.neg = true
		tok = tok[1:]
	}
	mant, expText := tok, ""
	if i := strings.IndexAny(tok, "eE"); i >= 0 {
		mant, expText = tok[:i], tok[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	exp := -len(frac)
	if expText != "" {
		exp += parseExp(expText)
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return decimal{}
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	d.coef = trimmed
	d.exp = max(-maxExp, min(maxExp, exp))
	return d
}

// parseExp parses an exponent ("+12", "-3", "400"), saturating at ±maxExp.
func parseExp(s string) int {
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
		if n > maxExp {
			n = maxExp
			break
		}
	}
	if neg {
		return -n
	}
	return n
}

func (d decimal) zero() bool { return d.coef == "" }

// intDigits is the number of digits before the decimal point (0 for |d| < 1).
func (d decimal) intDigits() int { return max(0, len(d.coef)+d.exp) }

// fracDigits is the number of significant fraction digits.
func (d decimal) fracDigits() int { return max(0, -d.exp) }

// int64 returns d as an int64. integral is false when d has a fraction; ok
// is false when it is integral but outside int64.
func (d decimal) int64() (n int64, integral, ok bool) {
	if d.zero() {
		return 0, true, true
	}
	if d.exp < 0 {
		return 0, false, false
	}
	if d.intDigits() > 19 {
		return 0, true, false
	}
	s := d.coef + strings.Repeat("0", d.exp)
	if d.neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, true, err == nil
}

// fixed renders d with exactly scale fraction digits; d must have no more.
func (d decimal) fixed(scale int) string {
	if d.zero() {
		if scale == 0 {
			return "0"
		}
		return "0." + strings.Repeat("0", scale)
	}
	// All digits, scaled so that the last scale digits are the fraction.
	digits := d.coef + strings.Repeat("0", d.exp+scale)
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	b.WriteString(digits[:len(digits)-scale])
	if scale > 0 {
		b.WriteByte('.')
		b.WriteString(digits[len(digits)-scale:])
	}
	return b.String()
}

// scaledInt returns d × 10^shift as an int64 when that is an integer
// within int64. integral is false for a fraction; ok is false when it is
// integral but too large.
func (d decimal) scaledInt(shift int) (n int64, integral, ok bool) {
	if d.zero() {
		return 0, true, true
	}
	e := d.exp + shift
	if e < 0 {
		return 0, false, false
	}
	if len(d.coef)+e > 19 {
		return 0, true, false
	}
	s := d.coef + strings.Repeat("0", e)
	if d.neg {
		s = "-" + s
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, true, err == nil
}

// float returns the float64 nearest to d (ties to even); ok is false when
// its magnitude exceeds the float64 maximum.
func float(tok string) (float64, bool) {
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil && math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}
