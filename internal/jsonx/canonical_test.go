package jsonx_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

var (
	flavours = []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII}
	orders   = []jsonx.KeyOrder{jsonx.CanonicalOrder, jsonx.JSONBOrder}
)

// checkCanonical fails unless AppendCanonical agrees with ParseSorted and
// AppendOrdered on data, in every flavour and key order: the same bytes
// after a kept prefix, or the same error with the prefix alone returned.
func checkCanonical(t *testing.T, data []byte) {
	t.Helper()
	v, wantErr := jsonx.ParseSorted(data)
	for _, f := range flavours {
		for _, o := range orders {
			got, err := jsonx.AppendCanonical([]byte("prefix"), data, f, o)
			if !sameError(err, wantErr) {
				t.Fatalf("AppendCanonical(%.80q, %d, %d) error = %v, ParseSorted error = %v", data, f, o, err, wantErr)
			}
			if err != nil {
				if string(got) != "prefix" {
					t.Fatalf("AppendCanonical(%.80q, %d, %d) failed and returned %.80q, want the prefix alone", data, f, o, got)
				}
				continue
			}
			if want := jsonx.AppendOrdered([]byte("prefix"), v, f, o); !bytes.Equal(got, want) {
				t.Fatalf("AppendCanonical(%.80q, %d, %d) =\n%.300q\nwant AppendOrdered(ParseSorted) =\n%.300q", data, f, o, got, want)
			}
		}
	}
}

// canonicalEdgeCases are documents written for AppendCanonical: the corners
// of a streaming rewrite that the parser's own tests do not aim at.
func canonicalEdgeCases() []string {
	deepArrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObjects := func(n int) string { return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) }
	// Every level out of order: the members must be moved at each level.
	deepUnsorted := func(n int, inner string) string {
		return strings.Repeat(`{"b":`, n) + inner + strings.Repeat(`,"a":1}`, n)
	}
	cases := []string{
		// Depth, at and beyond the limit, sorted and not.
		deepArrays(jsonx.MaxDepth), deepArrays(jsonx.MaxDepth + 1), deepObjects(jsonx.MaxDepth), deepObjects(jsonx.MaxDepth + 1),
		deepUnsorted(10, `"x"`), deepUnsorted(jsonx.MaxDepth, "0"), deepUnsorted(jsonx.MaxDepth+1, "0"),
		deepUnsorted(jsonx.MaxDepth-1, `[`+strings.Repeat(`"`+strings.Repeat("y", 64)+`",`, 200)+`0]`),
		deepUnsorted(jsonx.MaxDepth-1, `{"b":1,"b":2}`), deepUnsorted(jsonx.MaxDepth-1, "NaN"), deepUnsorted(400, "]"),
		deepUnsorted(jsonx.MaxDepth, "0") + "x", deepUnsorted(jsonx.MaxDepth, "0")[1:],
		// Duplicates: in order, out of order, several, via escapes, and
		// with a later error in the same or an enclosing object.
		`{"a":1,"a":2}`, `{"b":1,"a":1,"b":2}`, `{"c":1,"b":1,"a":1,"b":2,"c":2}`, `{"c":1,"b":1,"a":1,"c":2,"b":2}`,
		`{"a":1,"\u0061":2}`, `{"é":1,"\u00e9":2}`, `{"ab":1,"b":2,"ab":3}`, `{"b":1,"a":2,"a":3,"x":tru}`,
		`{"y":{"b":1,"a":1,"b":2},"x":}`, `{"a":1,"b":2,"a":3,"c":NaN}`, `[{"b":0,"a":0},{"k":1,"k":1}]`,
		`{"a":{"b":{"c":[1,{"d":1,"d":2}]}}}`, `{"\n":1,"\n":2}`, `{"":1,"":2}`, `{"":1,"a":{"":[NaN]}}`,
		// NaN paths through escaped, non-ASCII and empty keys.
		`{"\u00e9":{"b":[NaN]}}`, `{"a.b":[0,[1,Infinity]]}`, `{"":-Infinity}`, `[[],[{"z":{}, "y":NaN}]]`,
		// Numbers: exact integers, -0, and floats in every range.
		`-0`, `[-0,0,-0.0,0.0,-0e0,0E-0,-0.0e+5]`, `1e308`, `1.7976931348623157e308`, `1.8e308`, `-1e309`,
		`5e-324`, `2e-324`, `1e-400`, `1E+2`, `1e-5`, `0.0001`, `1e16`, `9999999999999999.0`, `123.456e-7`,
		`0.1`, `100.0`, `12345678901234567890.5`, `1` + strings.Repeat("0", 400) + `.0`,
		`0.` + strings.Repeat("3", 40), `-` + strings.Repeat("9", 4300), strings.Repeat("1", 4301),
		`[1.5e3, 2E-3, -7e+2, 10000000000000001]`, `[-]`, `[1.]`, `[1e]`, `[01]`, `[-01]`, `[.5]`, `[+1]`,
		// Escapes, surrogates and raw characters.
		`"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u0020\u007f\u0080\u00ff\u07ff\u0800\u2028\ufffd\uffff"`,
		`"\uD83D\uDE00\ud83d\ude00\uDBFF\uDFFF\ud800\udc00"`, `"\ud800"`, `"x\udc00"`, `"\ud800\u0041"`,
		`"\ud800x"`, `"\ud83d\ud83d"`, `"\ude00\ud83d"`, `"\ud83d`, `"\ud83d\`, `"\ud83d\u`, `"\ud83d\ude0`,
		`"\u12G4"`, `"\u12"`, `"\x"`, `"a\`, "\"\x7f\u00e9\u2028\U0001F600\ufffd\"", "\"tab\there\"",
		"{\"k\x01\":1}", `{"\u00e9\n":"\u00e9\n"}`, "{\"é\":\"😀\",\"\\ud83d\\ude00\":\"é\"}",
		// Invalid UTF-8, in strings, keys and elsewhere.
		"\"\xff\"", "{\"\xff\":1}", "{\"a\xc3\":1}", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[1,\"\xf4\x90\x80\x80\"]", "\xef\xbb\xbf[]",
		// Keys whose JSONB order differs from the canonical one.
		`{"é":1,"ab":2,"b":3,"😀":4,"abcd":5,"\u00e8":6,"aa":7,"":8}`, `{"bb":1,"a":2,"ccc":3,"Z":4}`,
		`{"\u00e9":1,"ab":2}`, `{"\ud83d\ude00":1,"abc":2,"abcde":3}`,
		// Empty containers and whitespace everywhere.
		`{}`, `[]`, `{"a":{},"b":[]}`, `[{},[],{}]`, `[[[]],{"a":[{}]}]`, " \t\n\r{ \"b\" : [ 1 , 2 ] , \"a\" : { } } \n",
		"{\r\n\t\"z\"\t:\r\n[ ]\n,\n\"y\" :{\n}\n}\t", "[ ]", "{ }", "{ \"a\" : 1 , }", "[ 1 , ]",
		// Trailing data and truncation.
		`{} x`, `[1]]`, `1 2`, `"a"b`, "{}\x00", `{"a":1}}`, `{"a":1`, `{"a"`, `{"a":`, `{`, `[`, `"`, `tr`, `nul`,
		`{"b":1,"a":2`, `{"b":1,"a":2,`, `[{"b":1,"a":2}`,
	}
	// Large objects out of order with several repeated keys: the one to
	// report is the repeat that comes first, whatever the sort does with
	// equal keys.
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{17, 20, 40, 100} {
		for range 20 {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(rng.IntN(n))
			}
			var b strings.Builder
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`"` + k + `":` + strconv.Itoa(i))
			}
			b.WriteByte('}')
			cases = append(cases, b.String())
		}
	}
	// Strings whose special byte lands at every offset of the 8-byte scan.
	for n := range 18 {
		pad := strings.Repeat("x", n)
		for _, special := range []string{`\n`, `\"`, `\u00e9`, "é", "\x7f", "😀", "\x01", "\xff"} {
			cases = append(cases, `"`+pad+special+pad+`"`, `{"`+pad+special+`":"`+special+pad+`","`+pad+`":0}`)
		}
		cases = append(cases, `"`+pad, `["`+pad+`"]`)
	}
	return cases
}

// canonicalInputs returns every input of the differential tests: the
// parser's test cases and fuzz seeds, its fuzz corpus, the golden
// documents, the benchmark payloads and canonicalEdgeCases.
func canonicalInputs(t testing.TB) [][]byte {
	t.Helper()
	var ins []string
	ins = append(ins, parseSeeds...)
	ins = append(ins, parseSortedInputs()...)
	for _, c := range parseValueCases() {
		ins = append(ins, c.in)
	}
	for _, c := range parseErrorCases() {
		ins = append(ins, c.in)
	}
	ins = append(ins, canonicalEdgeCases()...)
	ins = append(ins, string(benchPayload), string(benchFlat))
	out := make([][]byte, 0, len(ins))
	for _, s := range ins {
		out = append(out, []byte(s))
	}
	for _, name := range []string{"payload_envelopes.ascii.jsonl", "encryption_envelopes.ascii.jsonl", "dlq_bodies.ascii.jsonl"} {
		out = append(out, bytes.Split(readTestdata(t, name), []byte("\n"))...)
	}
	out = append(out, readTestdata(t, "file_record.pretty.json"))
	return append(out, fuzzCorpus(t, "FuzzParse")...)
}

// fuzzCorpus reads the []byte inputs kept in testdata/fuzz/<target>.
func fuzzCorpus(t testing.TB, target string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a one-value corpus file", file)
		}
		quoted, ok := strings.CutPrefix(lines[1], "[]byte(")
		quoted, ok2 := strings.CutSuffix(quoted, ")")
		s, err := strconv.Unquote(quoted)
		if !ok || !ok2 || err != nil {
			t.Fatalf("%s: cannot read value %.40s…", file, lines[1])
		}
		out = append(out, []byte(s))
	}
	if len(out) == 0 {
		t.Fatalf("no corpus in testdata/fuzz/%s", target)
	}
	return out
}

func TestAppendCanonicalMatchesParseSorted(t *testing.T) {
	for _, in := range canonicalInputs(t) {
		checkCanonical(t, in)
	}
}

// TestAppendCanonicalProperty feeds random documents written with members
// in random order, in both flavours and pretty or compact, now and then
// with a repeated key, and then each with one random byte edit (which
// mostly makes it invalid).
func TestAppendCanonicalProperty(t *testing.T) {
	const seed = 7
	rng := rand.New(rand.NewPCG(seed, 8))
	edits := []byte("{}[],:\" \\0123456789.eE+-tfnuNI\x01\x7f\xc3\xa9")
	for i := range 1500 {
		v := randomValue(rng, 0)
		in := appendShuffled(rng, nil, v, flavours[rng.IntN(2)])
		if i%5 == 0 {
			in = jsonx.MarshalPretty(v, flavours[rng.IntN(2)])
		}
		checkCanonical(t, in)
		if len(in) == 0 {
			continue
		}
		edited := slices.Clone(in)
		at := rng.IntN(len(in))
		switch rng.IntN(3) {
		case 0:
			edited = slices.Delete(edited, at, at+1)
		case 1:
			edited = slices.Insert(edited, at, edits[rng.IntN(len(edits))])
		default:
			edited[at] = edits[rng.IntN(len(edits))]
		}
		checkCanonical(t, edited)
	}
}

// appendShuffled writes v (from randomValue) as JSON text with each map's
// members in random order, repeating a key now and then.
func appendShuffled(rng *rand.Rand, dst []byte, v any, f jsonx.Flavour) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x)+1)
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		if len(keys) > 0 && rng.IntN(20) == 0 {
			keys = slices.Insert(keys, rng.IntN(len(keys)+1), keys[rng.IntN(len(keys))])
		}
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonx.AppendString(dst, k, f)
			dst = append(dst, ':')
			dst = appendShuffled(rng, dst, x[k], f)
		}
		return append(dst, '}')
	case []any:
		dst = append(dst, '[')
		for i, item := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendShuffled(rng, dst, item, f)
		}
		return append(dst, ']')
	}
	return jsonx.Append(dst, v, f)
}

func FuzzAppendCanonical(f *testing.F) {
	for _, in := range canonicalInputs(f) {
		f.Add(in)
	}
	f.Fuzz(checkCanonical)
}

// TestAppendCanonicalAllocations checks that re-encoding a typical payload
// into a buffer with room costs no allocation: the scratch is pooled.
func TestAppendCanonicalAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled scratch at random")
	}
	buf := make([]byte, 0, 4096)
	for _, in := range [][]byte{benchFlat, benchPayload, []byte(`{"b":{"y":"\u00e9\n","x":[1.5,-0,{"k":"v"}]},"a":"x"}`)} {
		for _, o := range orders {
			n := testing.AllocsPerRun(100, func() {
				if _, err := jsonx.AppendCanonical(buf[:0], in, jsonx.ASCII, o); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("AppendCanonical(%.40s…, ASCII, %d) allocates %v times, want 0", in, o, n)
			}
		}
	}
}

func TestAppendCanonicalPanicsOnInvalidArguments(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    jsonx.Flavour
		o    jsonx.KeyOrder
	}{{"flavour", 0, jsonx.CanonicalOrder}, {"order", jsonx.UTF8, 7}} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendCanonical(%d, %d) did not panic", tt.f, tt.o)
				}
			}()
			jsonx.AppendCanonical(nil, []byte("1"), tt.f, tt.o)
		})
	}
}

// benchFlat is a 256-byte object payload whose keys are already in order.
var benchFlat = []byte(`{"n":1000000001,"pad":"` + strings.Repeat("x", 256-len(`{"n":1000000001,"pad":""}`)) + `"}`)

// BenchmarkAppendCanonical compares the payload path of a SQL row before
// (ParseSorted, then AppendOrdered) and after (AppendCanonical), in the
// ASCII flavour, for a flat payload in key order and the nested order-like
// benchPayload, whose objects are not.
func BenchmarkAppendCanonical(b *testing.B) {
	for _, in := range []struct {
		name string
		data []byte
	}{{"flat", benchFlat}, {"order", benchPayload}} {
		for _, o := range []struct {
			name  string
			order jsonx.KeyOrder
		}{{"canonical", jsonx.CanonicalOrder}, {"jsonb", jsonx.JSONBOrder}} {
			buf := make([]byte, 0, 4096)
			b.Run(in.name+"/"+o.name+"/tree", func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					v, err := jsonx.ParseSorted(in.data)
					if err != nil {
						b.Fatal(err)
					}
					buf = jsonx.AppendOrdered(buf[:0], v, jsonx.ASCII, o.order)
				}
			})
			b.Run(in.name+"/"+o.name+"/stream", func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if buf, err = jsonx.AppendCanonical(buf[:0], in.data, jsonx.ASCII, o.order); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
