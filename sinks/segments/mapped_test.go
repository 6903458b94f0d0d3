package segments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/nats-sinks/nats-sink/sink"
)

func mappedConfig(t *testing.T) Config {
	t.Helper()
	op, err := Decode(json.RawMessage(`{"type":"segments","directory":"d","format":"parquet","mapping":[
	  {"column":"customer","path":"/customer","type":"text","default":"anon"},
	  {"column":"qty","path":"/qty","type":"bigint"},
	  {"column":"price","path":"/price","type":"double"},
	  {"column":"paid","path":"/paid","type":"boolean"},
	  {"column":"at","path":"/at","type":"timestamp","epoch_unit":"ms"},
	  {"column":"subj","path":"$subject","type":"text","required":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := op.(Config)
	c.Directory = filepath.Join(t.TempDir(), "lake")
	return c
}

// TestMappedColumns writes mapped columns of every supported type: the
// Parquet schema has them after the fixed columns with their types, the
// values are converted, a payload that is not an object leaves pointer
// columns missing (default or null), and an unconvertible value fails that
// message alone as a ValidationError.
func TestMappedColumns(t *testing.T) {
	c := mappedConfig(t)
	s := newSink(t, c)
	batch := envs("S", 1, 3)
	batch[0].Data = []byte(`{"customer":"c1","qty":3,"price":2.5,"paid":true,"at":1780000000000}`)
	batch[1].Data = []byte(`plain text`)
	batch[2].Data = []byte(`{"qty":"three"}`)
	rs := s.WriteBatch(t.Context(), batch)
	if rs[0].Outcome != sink.Held || rs[1].Outcome != sink.Held {
		t.Fatalf("results = %v, %v (%v, %v), want held", rs[0].Outcome, rs[1].Outcome, rs[0].Err, rs[1].Err)
	}
	want := `segments row for subject orders.new (stream seq 3): mapping column "qty" (path "/qty"): `
	if rs[2].Outcome != sink.Permanent || rs[2].ErrorType != sink.ValidationError || !strings.HasPrefix(rs[2].Err.Error(), want) {
		t.Fatalf("unconvertible = %v %s %v, want Permanent ValidationError starting %q", rs[2].Outcome, rs[2].ErrorType, rs[2].Err, want)
	}
	if err := s.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSettled(t, []sink.Hold{rs[0].Hold, rs[1].Hold}, sink.Committed)
	final, _ := filepath.Glob(filepath.Join(c.Directory, "*", "*", "*", "*", "*", "*.parquet"))
	if len(final) != 1 {
		t.Fatalf("segments %v, want one", final)
	}
	f, err := os.Open(final[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	fs := pf.Schema().Fields()
	var got []string
	for _, fld := range fs[len(fixedColumns):] {
		got = append(got, fld.Name()+" "+fld.Type().String()+map[bool]string{true: " optional", false: ""}[fld.Optional()])
	}
	wantCols := []string{"customer STRING optional", "qty INT(64,true) optional", "price DOUBLE optional",
		"paid BOOLEAN optional", "at TIMESTAMP(isAdjustedToUTC=true,unit=NANOS) optional", "subj STRING"}
	if diff := cmp.Diff(wantCols, got); diff != "" {
		t.Errorf("mapped columns (-want +got):\n%s", diff)
	}
	if v, _ := pf.Lookup("nats_sinks.mapping"); !strings.Contains(v, `"column":"customer"`) {
		t.Errorf("nats_sinks.mapping = %s", v)
	}
	rows := make([]parquet.Row, 2)
	r := pf.RowGroups()[0].Rows()
	n, _ := r.ReadRows(rows)
	r.Close()
	if n != 2 {
		t.Fatalf("read %d rows, want 2", n)
	}
	vals := func(row parquet.Row) []string {
		var out []string
		for _, v := range row[len(row)-6:] {
			if v.IsNull() {
				out = append(out, "null")
			} else {
				out = append(out, v.String())
			}
		}
		return out
	}
	if diff := cmp.Diff([]string{"c1", "3", "2.5", "true", "1780000000000000000", "orders.new"}, vals(rows[0])); diff != "" {
		t.Errorf("row 1 mapped values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"anon", "null", "null", "null", "null", "orders.new"}, vals(rows[1])); diff != "" {
		t.Errorf("row 2 (text payload) mapped values (-want +got):\n%s", diff)
	}
}

func TestMappingProblems(t *testing.T) {
	for _, tt := range []struct{ doc, want string }{
		{`{"type":"segments","directory":"d","mapping":[{"column":"a","path":"/a","type":"text"}]}`, "mapping: only allowed with format parquet"},
		{`{"type":"segments","directory":"d","lenient_strings":true}`, "lenient_strings: only allowed with format parquet"},
		{`{"type":"segments","directory":"d","format":"parquet","mapping":[{"column":"a","path":"/a","type":"numeric(5,2)"}]}`,
			`mapping[0].type: segments supports text, bigint, double, boolean, timestamp (got "numeric(5,2)")`},
		{`{"type":"segments","directory":"d","format":"parquet","mapping":[{"column":"payload","path":"/a","type":"text"}]}`,
			`mapping[0].column: "payload" is a fixed column of every segment`},
		{`{"type":"segments","directory":"d","format":"parquet","mapping":[{"column":"A","path":"/a","type":"text"}]}`,
			`mapping[0].column: must match ^[a-z_][a-z0-9_]{0,62}$ (got "A")`},
	} {
		got := problems(t, tt.doc)
		if !containsStr(got, tt.want) {
			t.Errorf("Decode(%s) = %q, want a problem %q", tt.doc, got, tt.want)
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
