package record

import (
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// ISO formats a time as docs/formats.md#json-encoding ISO string (µs, "+00:00"):
// YYYY-MM-DDTHH:MM:SS+00:00, with .ffffff before the offset only when the
// microsecond part is non-zero, as Python's datetime.isoformat() does.
// Sub-microsecond digits are truncated.
func ISO(t time.Time) string {
	return string(AppendISO(make([]byte, 0, 32), t))
}

// AppendISO appends ISO(t) to b.
func AppendISO(b []byte, t time.Time) []byte {
	t = t.UTC()
	b = appendDateTime(b, t, 'T')
	if us := t.Nanosecond() / 1000; us != 0 {
		b = append(b, '.')
		b = appendPadded(b, us, 6)
	}
	return append(b, "+00:00"...)
}

// FailedAt formats t as the x-failed-at header: YYYY-MM-DDTHH:MM:SS.sssZ in
// UTC, milliseconds truncated (docs/formats.md#json-encoding).
func FailedAt(t time.Time) string {
	t = t.UTC()
	b := appendDateTime(make([]byte, 0, 24), t, 'T')
	b = append(b, '.')
	b = appendPadded(b, t.Nanosecond()/1e6, 3)
	return string(append(b, 'Z'))
}

func appendDateTime(b []byte, t time.Time, sep byte) []byte {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	b = appendPadded(b, y, 4)
	b = append(b, '-')
	b = appendPadded(b, int(mo), 2)
	b = append(b, '-')
	b = appendPadded(b, d, 2)
	b = append(b, sep)
	b = appendPadded(b, h, 2)
	b = append(b, ':')
	b = appendPadded(b, mi, 2)
	b = append(b, ':')
	return appendPadded(b, s, 2)
}

// appendPadded appends v (≥ 0) in decimal, zero-padded to width digits.
func appendPadded(b []byte, v, width int) []byte {
	var buf [20]byte
	i := len(buf)
	for v >= 10 || width > 1 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	i--
	buf[i] = byte('0' + v)
	return append(b, buf[i:]...)
}

// JetStreamTime converts a JetStream timestamp to microsecond precision the
// way upstream does (float seconds, round half to even), docs/formats.md#json-encoding: the client
// divides the nanosecond token by 1e9 into a float, and Python's
// datetime.fromtimestamp splits that with modf and rounds the fraction's
// microseconds half to even. This is not truncation: …123456789 ns becomes
// .123457, and the float step near 2026 (≈ 0.24 µs) can move a value that
// sits on a microsecond boundary. The zero time stays zero (unknown).
func JetStreamTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	f := float64(t.UnixNano()) / 1e9
	sec, frac := math.Modf(f)
	us := math.RoundToEven(frac * 1e6)
	// time.Unix normalises a fraction of ±1e6 µs into the seconds, which is
	// upstream's carry.
	return time.Unix(int64(sec), int64(us)*1000).UTC()
}

// Micro truncates t to microseconds in UTC, the precision of every captured
// time (received_at, stored_at).
func Micro(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// minNanoTime and maxNanoTime bound the times whose UnixNano fits int64.
var (
	minNanoTime = time.Unix(0, math.MinInt64).UTC()
	maxNanoTime = time.Unix(0, math.MaxInt64).UTC()
)

// epochNS returns the nanoseconds since the epoch of t as an int64 when they
// fit (1677–2262), else as a *big.Int. A far-off Nats-Time-Stamp is legal
// input and upstream's integers are unbounded, so nothing may wrap.
func epochNS(t time.Time) (int64, *big.Int) {
	if !t.Before(minNanoTime) && !t.After(maxNanoTime) {
		return t.UnixNano(), nil
	}
	n := big.NewInt(t.Unix())
	n.Mul(n, big.NewInt(1e9))
	return 0, n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

// EpochNS returns the epoch-ns JSON value of t (docs/formats.md#json-encoding): an int64
// when it fits, else an exact jsonx.Integer.
func EpochNS(t time.Time) any {
	n, b := epochNS(t)
	if b != nil {
		return jsonx.Integer(b.String())
	}
	return n
}

// exact is 2^53: integers up to it convert to float64 exactly.
const exact = 1 << 53

// AgeSeconds returns max(0, (later − earlier) / 1e9) seconds as the
// correctly rounded float64 of the exact ratio, as Python's int / int is
// (docs/formats.md#metadata-document). When |d| ≤ 2^53 both operands of float64(d)/1e9 are
// exact and IEEE division rounds correctly, so the fast path is exact; beyond
// that the conversion of d itself rounds, so largeSeconds divides in
// integers, and big.Rat handles times whose nanoseconds overflow int64.
func AgeSeconds(later, earlier time.Time) float64 {
	l, lb := epochNS(later)
	e, eb := epochNS(earlier)
	if lb == nil && eb == nil {
		d := l - e
		// Overflow is impossible to miss: it flips the sign relative to the
		// operands' order.
		if (d >= 0) == (l >= e) {
			switch {
			case d >= -exact && d <= exact:
				return nonNegative(float64(d) / 1e9)
			case d < 0:
				return 0
			}
			// More than 104 days: an old message replayed, or a stored
			// time far from a fixed JetStream timestamp.
			return largeSeconds(d)
		}
	}
	return nonNegative(ratioSeconds(bigNS(l, lb), bigNS(e, eb)))
}

// largeSeconds is the correctly rounded float64 of d / 1e9 for
// 2^53 < d < 2^63, in integer arithmetic (big.Rat costs microseconds and
// allocations). With d = q·1e9 + r, the quotient scaled by 2^k is
// q<<k + (r<<k)/1e9, where k makes q<<k a 53-bit number, the width of a
// float64 mantissa; the remainder rounds it to nearest. q ≥ 2^53/1e9 >
// 2^23, so k ≤ 29 and r<<k < 2^59 cannot overflow; q < 2^34, so k ≥ 19.
func largeSeconds(d int64) float64 {
	q, r := uint64(d)/1e9, uint64(d)%1e9
	k := 53 - bits.Len64(q)
	n := q<<k + (r<<k)/1e9
	// An exact tie would need d·2^(k+1) = odd·1e9, but 1e9 has only nine
	// factors of two and k ≥ 19, so rounding up from half is never wrong.
	if rem := (r << k) % 1e9; 2*rem >= 1e9 {
		n++
	}
	return math.Ldexp(float64(n), -k)
}

func bigNS(n int64, b *big.Int) *big.Int {
	if b != nil {
		return b
	}
	return big.NewInt(n)
}

// ratioSeconds is the correctly rounded float64 of (l − e) / 1e9.
func ratioSeconds(l, e *big.Int) float64 {
	d := new(big.Int).Sub(l, e)
	f, _ := new(big.Rat).SetFrac(d, big.NewInt(1e9)).Float64()
	return f
}

// nonNegative is Python's max(0.0, x): never -0.0.
func nonNegative(x float64) float64 {
	if x > 0 {
		return x
	}
	return 0
}
