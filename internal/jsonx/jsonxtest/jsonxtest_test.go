package jsonxtest

import "testing"

// TestJSONBOrdered makes sure the checker can fail.
func TestJSONBOrdered(t *testing.T) {
	for _, bad := range []string{`{"aa":1,"b":2}`, `{"b":1,"a":2}`, `[{"x":{"a":1,"a":2}}]`, `{"a":{"c":[],"b":{}},"b":0}`,
		`{"b":{"x":1},"a":0}`, `{"\u00e9":1,"z":2}`} {
		if JSONBOrdered([]byte(bad)) == nil {
			t.Errorf("JSONBOrdered(%s) = nil, want an error", bad)
		}
	}
	if err := JSONBOrdered([]byte(`{"z":[{"b":1,"aa":{"c":2,"bb":3}}],"\u00e9":1,"abc":{}}`)); err != nil {
		t.Errorf("jsonbOrdered of an ordered document: %v", err)
	}
}
