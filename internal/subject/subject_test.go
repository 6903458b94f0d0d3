package subject

import "testing"

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		valid   bool
	}{
		{"orders.>", true},
		{"orders.*.created", true},
		{">", true},
		{"*", true},
		{"a", true},
		{"", false},
		{" orders", false},
		{"orders ", false},
		{"a..b", false},
		{".a", false},
		{"a.", false},
		{"a.>.b", false},
		{"a.b*", false},
		{"a.>b", false},
		{"a.b c", false},
		{"a.b\tc", false},
	} {
		if got := Validate(tt.pattern) == nil; got != tt.valid {
			t.Errorf("Validate(%q) valid = %v, want %v", tt.pattern, got, tt.valid)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, subject string
		want             bool
	}{
		{"orders.>", "orders.created", true},
		{"orders.>", "orders.a.b.c", true},
		{"orders.>", "orders", false},
		{">", "x", true},
		{"orders.*", "orders.created", true},
		{"orders.*", "orders.created.eu", false},
		{"orders.*", "orders", false},
		{"*.created", "orders.created", true},
		{"orders.created", "orders.created", true},
		{"orders.created", "orders.createdx", false},
		{"orders.created", "orders", false},
		{"orders", "orders.created", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
	} {
		if got := Match(tt.pattern, tt.subject); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
		}
	}
}

func TestContains(t *testing.T) {
	for _, tt := range []struct {
		outer, inner string
		want         bool
	}{
		{"orders.>", "orders.created", true},
		{"orders.>", "orders.*", true},
		{"orders.>", "orders.>", true},
		{"orders.>", "orders", false},
		{">", "a.b", true},
		{"orders.*", "orders.created", true},
		{"orders.*", "orders.*", true},
		{"orders.*", "orders.>", false},
		{"orders.*", "orders.a.b", false},
		{"orders.created", "orders.*", false},
		{"orders.created", "orders.created", true},
		{"orders.a", "orders.b", false},
		{"a.b", "a.b.c", false},
		{"dlq.orders", "orders.>", false},
	} {
		if got := Contains(tt.outer, tt.inner); got != tt.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tt.outer, tt.inner, got, tt.want)
		}
	}
}

func TestIsLiteral(t *testing.T) {
	for s, want := range map[string]bool{"dlq.orders": true, "dlq.*": false, "dlq.>": false, "": false, "a..b": false} {
		if got := IsLiteral(s); got != want {
			t.Errorf("IsLiteral(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzMatchContains checks that Contains is conservative: whenever it claims
// outer contains inner, every literal subject derived from inner matches outer.
func FuzzMatchContains(f *testing.F) {
	f.Add("orders.>", "orders.*", "orders.x")
	f.Add("a.*.c", "a.b.c", "a.b.c")
	f.Fuzz(func(t *testing.T, outer, inner, subj string) {
		if Validate(outer) != nil || Validate(inner) != nil || !IsLiteral(subj) {
			return
		}
		if Contains(outer, inner) && Match(inner, subj) && !Match(outer, subj) {
			t.Errorf("Contains(%q, %q) but %q matches only the inner pattern", outer, inner, subj)
		}
	})
}

func TestOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"orders.>", "orders.secure.>", true},
		{"orders.>", "orders", false},
		{"orders.*", "orders.secure.>", false},
		{"orders.*", "orders.>", true},
		{"orders.*", "orders.a.b", false},
		{"orders.*.x", "orders.a.*", true},
		{"orders.*.x", "orders.a.y", false},
		{"orders.created", "orders.created", true},
		{"orders.created", "orders.deleted", false},
		{"audit.>", "orders.>", false},
		{">", "a", true},
		{"a.b", "a.b.c", false},
		{"a.b.>", "a.b", false},
		{"*", "a.b", false},
	} {
		for _, pair := range [][2]string{{tt.a, tt.b}, {tt.b, tt.a}} {
			if got := Overlap(pair[0], pair[1]); got != tt.want {
				t.Errorf("Overlap(%q, %q) = %v, want %v", pair[0], pair[1], got, tt.want)
			}
		}
	}
}
