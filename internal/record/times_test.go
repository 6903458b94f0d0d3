package record

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

func TestISO(t *testing.T) {
	for _, tt := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC), "2026-05-29T10:00:00+00:00"},
		{time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC), "2026-05-29T10:00:00.250000+00:00"},
		{time.Date(2026, 5, 29, 10, 0, 0, 123456789, time.UTC), "2026-05-29T10:00:00.123456+00:00"},
		{time.Date(2026, 5, 29, 10, 0, 0, 999, time.UTC), "2026-05-29T10:00:00+00:00"},
		{time.Date(2026, 5, 29, 12, 0, 0, 1000, time.FixedZone("x", 2*3600)), "2026-05-29T10:00:00.000001+00:00"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "0001-01-01T00:00:00+00:00"},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), "9999-12-31T23:59:59.999999+00:00"},
	} {
		if got := ISO(tt.in); got != tt.want {
			t.Errorf("ISO(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFailedAt(t *testing.T) {
	for _, tt := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC), "2026-05-29T10:00:00.000Z"},
		{time.Date(2026, 5, 29, 10, 0, 0, 123999999, time.UTC), "2026-05-29T10:00:00.123Z"},
		{time.Date(2026, 5, 29, 12, 0, 1, 5000000, time.FixedZone("x", 2*3600)), "2026-05-29T10:00:01.005Z"},
	} {
		if got := FailedAt(tt.in); got != tt.want {
			t.Errorf("FailedAt(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJetStreamTime(t *testing.T) {
	for _, tt := range []struct {
		ns   int64
		want string
	}{
		{1780048800123456000, "2026-05-29T10:00:00.123456+00:00"},
		{1780048800123456789, "2026-05-29T10:00:00.123457+00:00"}, // rounded, not truncated
		{1780048800999999600, "2026-05-29T10:00:01+00:00"},        // carry into the seconds
		{1780048800000000000, "2026-05-29T10:00:00+00:00"},
		{1000000000000500000, "2001-09-09T01:46:40.000500+00:00"},
		// Half a microsecond: the float is just below or above the tie;
		// what counts is doing what Python does with the same float.
		{1500, "1970-01-01T00:00:00.000002+00:00"}, // 1.5 µs: exact tie, even is 2
		{2500, "1970-01-01T00:00:00.000002+00:00"}, // 2.5 µs: exact tie, even is 2
	} {
		got := ISO(JetStreamTime(time.Unix(0, tt.ns)))
		if got != tt.want {
			t.Errorf("ISO(JetStreamTime(%d ns)) = %q, want %q", tt.ns, got, tt.want)
		}
	}
	if got := JetStreamTime(time.Time{}); !got.IsZero() {
		t.Errorf("JetStreamTime(zero) = %v, want zero", got)
	}
}

func TestEpochNS(t *testing.T) {
	for _, tt := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC), "1780048800250000000"},
		{time.Date(9999, 12, 31, 0, 0, 0, 1000, time.UTC), "253402214400000001000"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "-62135596800000000000"},
	} {
		var got string
		switch v := EpochNS(tt.in).(type) {
		case int64:
			got = big.NewInt(v).String()
		default:
			got = stringOf(v)
		}
		if got != tt.want {
			t.Errorf("EpochNS(%v) = %v, want %s", tt.in, got, tt.want)
		}
	}
}

// TestFloatDivisionExactBelow2p53 checks the claim AgeSeconds relies on: for
// |d| ≤ 2^53, float64(d)/1e9 equals the correctly rounded exact ratio.
func TestFloatDivisionExactBelow2p53(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(d int64) {
		want, _ := new(big.Rat).SetFrac(big.NewInt(d), big.NewInt(1e9)).Float64()
		if got := float64(d) / 1e9; got != want {
			t.Fatalf("float64(%d)/1e9 = %v, exact rounding %v", d, got, want)
		}
	}
	for _, d := range []int64{0, 1, 999, 1e9, exact, exact - 1, -exact, 750000000} {
		check(d)
	}
	for range 200000 {
		check(r.Int64N(2*exact+1) - exact)
		check(r.Int64N(1 << 33)) // ages of seconds: the common case
	}
}

func TestAgeSeconds(t *testing.T) {
	base := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name           string
		later, earlier time.Time
		want           float64
	}{
		{"golden receive age", base.Add(250 * time.Millisecond), base.Add(-500 * time.Millisecond), 0.75},
		{"golden store age", base.Add(300 * time.Millisecond), base.Add(-500 * time.Millisecond), 0.8},
		{"negative clamps to +0", base, base.Add(time.Second), 0},
		{"zero", base, base, 0},
		// 2^53 + 1 ns: float64(d) rounds d to 2^53 first, and
		// (2^53)/1e9 rounds differently from the exact (2^53+1)/1e9.
		{"beyond 2^53 ns", base.Add(time.Duration(exact + 1)), base, exactSeconds(exact + 1)},
		{"centuries, beyond int64 ns", time.Date(9999, 1, 1, 0, 0, 0, 1000, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
			bigSeconds("315506361600000001000")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := AgeSeconds(tt.later, tt.earlier)
			if got != tt.want || math.Signbit(got) {
				t.Errorf("AgeSeconds(%v, %v) = %v, want %v", tt.later, tt.earlier, got, tt.want)
			}
		})
	}
	// Over many large differences the result must equal big.Rat rounding,
	// and must differ from the naive float for some: otherwise the test
	// could not tell the two apart.
	r := rand.New(rand.NewPCG(3, 4))
	naiveDiffers := 0
	for range 20000 {
		d := exact + r.Int64N(1<<60)
		got := AgeSeconds(base.Add(time.Duration(d)), base)
		if want := exactSeconds(d); got != want {
			t.Fatalf("AgeSeconds over %d ns = %v, want %v", d, got, want)
		}
		if float64(d)/1e9 != got {
			naiveDiffers++
		}
	}
	if naiveDiffers == 0 {
		t.Errorf("float64(d)/1e9 matched exact rounding for every d > 2^53; the test does not exercise the exact path")
	}
}

func exactSeconds(d int64) float64 {
	f, _ := new(big.Rat).SetFrac(big.NewInt(d), big.NewInt(1e9)).Float64()
	return f
}

func bigSeconds(d string) float64 {
	n, _ := new(big.Int).SetString(d, 10)
	f, _ := new(big.Rat).SetFrac(n, big.NewInt(1e9)).Float64()
	return f
}

func TestParseTimeStamp(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	for _, tt := range []struct {
		in   string
		want time.Time // zero = rejected
	}{
		{"2026-05-29T09:59:59.5Z", utc(2026, 5, 29, 9, 59, 59, 500000000)},
		{"2026-05-29", utc(2026, 5, 29, 0, 0, 0, 0)},
		{"2026-05-29T10:00", utc(2026, 5, 29, 10, 0, 0, 0)},
		{"2026-05-29t10:00:01", utc(2026, 5, 29, 10, 0, 1, 0)},
		{"2026-05-29 10:00:01Z", utc(2026, 5, 29, 10, 0, 1, 0)},
		{"2026-05-29T10:00:01.123456789Z", utc(2026, 5, 29, 10, 0, 1, 123456000)},
		{"2026-05-29T10:00:01.1234569", utc(2026, 5, 29, 10, 0, 1, 123456000)}, // truncated, not rounded
		{"2026-05-29T12:00:00+02:00", utc(2026, 5, 29, 10, 0, 0, 0)},
		{"2026-05-29T00:30:00-01:30", utc(2026, 5, 29, 2, 0, 0, 0)},
		{"2026-05-29T10:00-00:00", utc(2026, 5, 29, 10, 0, 0, 0)},
		{"2024-02-29T00:00:00Z", utc(2024, 2, 29, 0, 0, 0, 0)},
		{"2000-02-29", utc(2000, 2, 29, 0, 0, 0, 0)},
		{"0001-01-01T00:00:01Z", utc(1, 1, 1, 0, 0, 1, 0)},
		{"2026-05-29T23:59:59.999999+23:59", utc(2026, 5, 29, 0, 0, 59, 999999000)},
		// Rejected: Q26 forms and everything else outside the subset.
		{"20260529T100000Z", time.Time{}},
		{"2026-W22-5", time.Time{}},
		{"2026-149", time.Time{}},
		{"2026-05-29T10:00:00+0200", time.Time{}},
		{"2026-05-29T10:00:00+02", time.Time{}},
		{"2026-05-29T10:00:00,5Z", time.Time{}},
		{"2026-05-29X10:00:00", time.Time{}},
		{"2026-05-29_10:00:00", time.Time{}},
		{"2026-05-29T10:00:00z", time.Time{}},
		{"2026-05-29Z", time.Time{}},
		{"2026-05-29T", time.Time{}},
		{"2026-05-29T10", time.Time{}},
		{"2026-05-29T1000", time.Time{}},
		{"2026-05-29T10:00:00.", time.Time{}},
		{"2026-05-29T10:00:00.Z", time.Time{}},
		{"2026-05-29T24:00:00", time.Time{}},
		{"2026-05-29T10:60:00", time.Time{}},
		{"2026-05-29T10:00:60", time.Time{}},
		{"2026-05-29T10:00:00+24:00", time.Time{}},
		{"2026-05-29T10:00:00+02:60", time.Time{}},
		{"2026-02-30", time.Time{}},
		{"2023-02-29", time.Time{}},
		{"1900-02-29", time.Time{}},
		{"2026-13-01", time.Time{}},
		{"2026-00-01", time.Time{}},
		{"0000-01-01", time.Time{}},
		{"2026-5-29", time.Time{}},
		{"+2026-05-29", time.Time{}},
		{" 2026-05-29", time.Time{}},
		{"2026-05-29 ", time.Time{}},
		{"２０２６-05-29", time.Time{}},
		{"", time.Time{}},
		{"2026-05-29T10:00:00Z ", time.Time{}},
		{"2026-05-29T10:00:00+02:00:00", time.Time{}},
	} {
		got, ok := ParseTimeStamp(tt.in)
		if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
			t.Errorf("ParseTimeStamp(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, !tt.want.IsZero())
		}
	}
}

func stringOf(v any) string {
	if s, ok := v.(jsonx.Integer); ok {
		return string(s)
	}
	return "unexpected type"
}

// TestJetStreamTimeVectors compares with vectors produced by CPython's
// datetime.fromtimestamp(n / 1e9, tz=timezone.utc).isoformat(), which is
// upstream's conversion (random instants in 1970–2100, half of them exactly
// on a half microsecond, where the rounding rule matters).
func TestJetStreamTimeVectors(t *testing.T) {
	data := readGolden(t, "jetstream_times.txt")
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 1000 {
		t.Fatalf("only %d vectors", len(lines))
	}
	for _, line := range lines {
		nsText, want, _ := strings.Cut(line, " ")
		ns, err := strconv.ParseInt(nsText, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := ISO(JetStreamTime(time.Unix(0, ns))); got != want {
			t.Errorf("ISO(JetStreamTime(%d ns)) = %q, want %q", ns, got, want)
		}
	}
}

func bigInt(s string) any { return jsonx.Integer(s) }

// TestLargeSecondsBounds checks largeSeconds at the ends of its range, where
// the scale k is largest (q just above 2^23) and smallest (q near 2^33).
func TestLargeSecondsBounds(t *testing.T) {
	for _, d := range []int64{exact + 1, exact + 999999999, 1<<62 + 1, math.MaxInt64, math.MaxInt64 - 5e8} {
		if got, want := largeSeconds(d), exactSeconds(d); got != want {
			t.Errorf("largeSeconds(%d) = %v, want %v", d, got, want)
		}
	}
}
