package postgres

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

func TestMarkDuplicates(t *testing.T) {
	key := []sqlmodel.Field{sqlmodel.StreamName, sqlmodel.StreamSequence}
	textKeyOf := func(stream, seq string) string {
		return textKey([][]byte{[]byte(stream), []byte(seq)}, key)
	}
	for _, tt := range []struct {
		name     string
		returned []string
		want     []bool
	}{
		{"rows not returned are duplicates", []string{textKeyOf("S", "1"), textKeyOf("S", "3")}, []bool{false, true, false, false}},
		{"nothing returned: every keyed row is a duplicate", nil, []bool{true, true, true, false}},
		{"a returned key that matches no row disables marking", []string{textKeyOf("S  ", "1")}, []bool{false, false, false, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := sqlmodel.Group{Table: &sqlmodel.Table{Key: key}}
			for i, stream := range []any{"S", "S", "S", nil} { // a NULL key never conflicts
				r := &sqlmodel.Row{}
				r.Values[sqlmodel.StreamName] = stream
				r.Values[sqlmodel.StreamSequence] = int64(i + 1)
				g.Rows = append(g.Rows, r)
			}
			markDuplicates(g, tt.returned)
			var got []bool
			for _, r := range g.Rows {
				got = append(got, r.Duplicate)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Duplicate flags (-want +got):\n%s", diff)
			}
		})
	}
}
