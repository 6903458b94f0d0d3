package jsonx_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// TestRoundTripProperty checks, over random value trees, that Marshal's
// output parses back to the same tree and that Parse followed by Marshal is
// idempotent, in both flavours and layouts.
func TestRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		v := randomValue(rng, 0)
		for _, f := range []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII} {
			for _, pretty := range []bool{false, true} {
				enc := jsonx.Marshal(v, f)
				if pretty {
					enc = jsonx.MarshalPretty(v, f)
				}
				back, err := jsonx.Parse(enc)
				if err != nil {
					t.Fatalf("case %d flavour %d pretty %v: Parse(Marshal(v)) error: %v\n%s", i, f, pretty, err, enc)
				}
				if diff := cmp.Diff(v, back, floatBits); diff != "" {
					t.Fatalf("case %d flavour %d pretty %v: round trip mismatch (-want +got):\n%s", i, f, pretty, diff)
				}
				if f == jsonx.ASCII && bytes.ContainsFunc(enc, func(r rune) bool { return r >= 0x7f }) {
					t.Fatalf("case %d: ASCII output contains a byte >= 0x7f: %q", i, enc)
				}
				again := jsonx.Marshal(back, f)
				if pretty {
					again = jsonx.MarshalPretty(back, f)
				}
				if !bytes.Equal(again, enc) {
					t.Fatalf("case %d: encoding not idempotent:\nfirst  %s\nsecond %s", i, enc, again)
				}
			}
		}
	}
}

// TestCanonicalisation checks that non-canonical spellings of one document
// all re-encode to the same canonical bytes.
func TestCanonicalisation(t *testing.T) {
	want := `{"a":[1,100.0,0.5,"é/\n"],"b":{"c":null,"d":-0.0},"e":0}`
	for _, in := range []string{
		want,
		`{"e":-0,"b":{"d":-0.0,"c":null},"a":[1,1e2,5E-1,"\u00e9\/\u000a"]}`,
		"\n{ \"b\" : { \"c\" : null , \"d\" : -0e0 } ,\r\n\t\"a\" : [ 1 , 100.00 , 0.50 , \"\\u00E9/\\n\" ] , \"e\" : 0 }\n",
	} {
		v, err := jsonx.Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := string(jsonx.Marshal(v, jsonx.UTF8)); got != want {
			t.Errorf("Marshal(Parse(%q)) = %s, want %s", in, got, want)
		}
	}
}

// randomValue builds the kinds of value Parse returns, nesting up to 6 deep.
func randomValue(rng *rand.Rand, depth int) any {
	kind := rng.IntN(10)
	if depth >= 6 && kind >= 8 {
		kind = rng.IntN(8)
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2, 3:
		return randomString(rng)
	case 4, 5:
		return randomInteger(rng)
	case 6, 7:
		return randomFloat(rng)
	case 8:
		a := make([]any, rng.IntN(5))
		for i := range a {
			a[i] = randomValue(rng, depth+1)
		}
		return a
	default:
		m := make(map[string]any)
		for range rng.IntN(6) {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	}
}

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		var r rune
		switch rng.IntN(7) {
		case 0:
			r = rune(rng.IntN(0x20)) // controls
		case 1:
			r = []rune{'"', '\\', '/', '<', '>', '&', 0x7f, 0x2028, 0x2029, 0xfffd, 0xffff}[rng.IntN(11)]
		case 2:
			r = 0x80 + rune(rng.IntN(0xd800-0x80)) // BMP below the surrogates
		case 3:
			r = 0xe000 + rune(rng.IntN(0x10000-0xe000)) // BMP above them
		case 4:
			r = 0x10000 + rune(rng.IntN(0x110000-0x10000)) // astral: surrogate pairs in ascii
		default:
			r = 0x20 + rune(rng.IntN(0x5f)) // printable ASCII
		}
		b.WriteRune(r)
	}
	return b.String()
}

func randomInteger(rng *rand.Rand) jsonx.Integer {
	switch rng.IntN(4) {
	case 0:
		return jsonx.Integer(strconv.Itoa(rng.IntN(10)))
	case 1:
		return jsonx.Integer(strconv.FormatInt(rng.Int64()-rng.Int64(), 10))
	default:
		// Beyond int64 and float64 precision, up to the digit limit.
		n := 1 + rng.IntN(60)
		if rng.IntN(50) == 0 {
			n = jsonx.MaxIntegerDigits
		}
		b := []byte{byte('1' + rng.IntN(9))}
		for range n - 1 {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		if rng.IntN(2) == 0 {
			b = append([]byte{'-'}, b...)
		}
		return jsonx.Integer(b)
	}
}

func randomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return []float64{0, math.Copysign(0, -1), 1e16, 1e-5, 1e-4, 5e-324, math.MaxFloat64, 0.1}[rng.IntN(8)]
	case 1:
		return float64(rng.IntN(2000)-1000) / 8
	default:
		for {
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	}
}
