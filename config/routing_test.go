package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fanoutDoc builds a configuration with a valid nats section and the given
// sink, sinks and routing members.
func fanoutDoc(rest string) string {
	return `{"nats": {"stream": "ORDERS", "consumer": "c", "subject": "orders.>"}, ` + rest + `}`
}

const twoSinks = `"sinks": {"audit": {"type": "file", "directory": "a"}, "db": {"type": "postgres", "dsn": "postgres://x"}}`

func TestRoutingProblems(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want []Problem
	}{
		{"fanout needs sinks and enabled routing", fanoutDoc(`"sink": {"type": "fanout"}`), []Problem{
			{Path: "sinks", Message: `must not be empty when sink.type is "fanout"`},
			{Path: "routing.enabled", Message: `must be true when sink.type is "fanout"`},
		}},
		{"compact sinks only leaves routing disabled", fanoutDoc(`"sink": {"type": "fanout", ` + twoSinks + `}`), []Problem{
			{Path: "routing.enabled", Message: `must be true when sink.type is "fanout"`},
		}},
		{"compact conflicts", fanoutDoc(`"sink": {"type": "fanout", "sinks": {}, "routes": []}, "sinks": {}, "routing": {}`), []Problem{
			{Path: "sink", Message: `sink.type "fanout" must not define both sink routing fields and top-level routing`},
			{Path: "sink.sinks", Message: `sink.type "fanout" must not define both sink.sinks and top-level sinks`},
			{Path: "sinks", Message: `must not be empty when sink.type is "fanout"`},
			{Path: "routing.enabled", Message: `must be true when sink.type is "fanout"`},
		}},
		{"fanout with other keys", fanoutDoc(`"sink": {"type": "fanout", "directory": "x", ` + twoSinks + `, "routes": [{"name": "r", "match": {"subject": "orders.>"}, "targets": "audit"}]}`), []Problem{
			{Path: "sink.directory", Message: "unknown key"},
		}},
		{"named sink rules", fanoutDoc(`"sink": {"type": "file", "directory": "d"}, "sinks": {"9bad": {}, "f": {"type": "fanout"}, "g": {"type": "gotham"}, "h": [], "k": {"type": "file"}}`), []Problem{
			{Path: "sinks.9bad", Message: nameRuleText},
			{Path: "sinks.f.type", Message: "fanout may only be the active sink"},
			{Path: "sinks.g.type", Message: `"gotham" is an upstream sink type that nats-sink does not provide`},
			{Path: "sinks.h", Message: "expected object (got array)"},
			{Path: "sinks.k.directory", Message: "required"},
		}},
		{"compact errors name the written place", fanoutDoc(`"sink": {"type": "fanout", "sinks": {"audit": {"type": "file"}}, "route_match_mode": "ALL", "routes": [{"name": "r", "match": {"subject": "orders.>"}, "targets": ["audit", "nope"]}]}`), []Problem{
			{Path: "sink.sinks.audit.directory", Message: "required"},
			{Path: "sink.route_match_mode", Message: `must be one of first, all (got "ALL")`},
			{Path: "sink.routes[0].targets[1]", Message: `unknown named sink "nope"`},
		}},
		{"route rules", fanoutDoc(`"sink": {"type": "file", "directory": "d"}, ` + twoSinks + `, "routing": {"enabled": true, "routes": [
			{"name": "r", "match": {}, "targets": []},
			{"name": "r", "match": {"priority": [" ", 1], "labels_all": "a;b", "labels_none": ["b"], "headers": [{"name": "Authorization", "values": ["x"]}, {"name": "host", "values": "x"}]}, "targets": [{"sink": "audit", "required": true, "timeout_ms": 5}, {"sink": "audit"}, 5]},
			{"name": "t", "match": {"subject": "orders.>", "labels_any": "b", "labels_none": "b"}, "targets": {"sink": "db", "required": false, "minimum_wait_ms": 5.0, "timeout_ms": "500"}},
			{"name": "u", "match": {"subject": "orders.>"}, "targets": {"sink": "audit", "required": false, "minimum_wait_ms": 2000}}
		]}`), []Problem{
			{Path: "routing.routes[0].match", Message: "must contain at least one criterion"},
			{Path: "routing.routes[0].targets", Message: "must not be empty"},
			{Path: "routing.routes[1].name", Message: `duplicate route name "r"`},
			{Path: "routing.routes[1].match.priority[0]", Message: "must not be empty"},
			{Path: "routing.routes[1].match.priority[1]", Message: "expected string (got number)"},
			{Path: "routing.routes[1].match.headers[0].name", Message: `must not match secret-bearing header "authorization"; publish a non-secret routing hint instead`},
			{Path: "routing.routes[1].match.headers[1].name", Message: `must not match protocol-owned header "host"`},
			{Path: "routing.routes[1].match.labels_none", Message: `must not overlap labels_all ("b")`},
			{Path: "routing.routes[1].targets[0]", Message: "minimum_wait_ms and timeout_ms are only valid when required is false"},
			{Path: "routing.routes[1].targets[1]", Message: `duplicate target "audit"`},
			{Path: "routing.routes[1].targets[2]", Message: "expected string or object"},
			{Path: "routing.routes[2].match.labels_any", Message: "every value is excluded by labels_none"},
			{Path: "routing.routes[2].targets[0].minimum_wait_ms", Message: "expected integer (got number)"},
			{Path: "routing.routes[2].targets[0].timeout_ms", Message: "expected integer (got string)"},
			{Path: "routing.routes[3].targets[0].timeout_ms", Message: "must be at least minimum_wait_ms (got 1000 < 2000)"},
		}},
		{"default targets and types", fanoutDoc(`"sink": {"type": "file", "directory": "d"}, ` + twoSinks + `, "routing": {"enabled": true, "no_match": "default_route", "target_sink_types": {"audit": "kafka", "ghost": "file", "db": "weird"}, "routes": [{"name": "r", "match": {"subject": "orders.>"}, "targets": "audit"}]}`), []Problem{
			{Path: "routing.target_sink_types.db", Message: `must be one of ` + strings.Join(routableTypes, ", ") + ` (got "weird")`},
			{Path: "routing.target_sink_types.audit", Message: `"kafka" does not match the named sink's type "file"`},
			{Path: "routing.target_sink_types.ghost", Message: "unknown named sink"},
			{Path: "routing.default_targets", Message: "required when no_match is default_route"},
		}},
		{"optional needs a type", fanoutDoc(`"sink": {"type": "file", "directory": "d"}, "sinks": {"k": {"type": "kafka"}}, "routing": {"enabled": true, "routes": [{"name": "r", "match": {"subject": "orders.>"}, "targets": {"sink": "k", "required": false}}]}`), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "test.json", testRegistry(), noEnv)
			if diff := cmp.Diff(tt.want, problemsOf(t, err)); diff != "" {
				t.Errorf("Parse problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRoutingLimits checks each limit at the bound and one above.
func TestRoutingLimits(t *testing.T) {
	list := func(n int, f func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ", ")
	}
	sinks := func(n int) string {
		return `"sinks": {` + list(n, func(i int) string { return fmt.Sprintf(`"s%d": {"type": "file", "directory": "d%d"}`, i, i) }) + `}`
	}
	route := func(i int, match, targets string) string {
		return fmt.Sprintf(`{"name": "r%d", "match": %s, "targets": %s}`, i, match, targets)
	}
	base := `"sink": {"type": "fanout"}, `
	for _, tt := range []struct {
		name      string
		doc       string
		wantPath  string
		wantError string
	}{
		{"64 named sinks", base + sinks(64) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `"s0"`) + `]}`, "", ""},
		{"65 named sinks", base + sinks(65) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `"s0"`) + `]}`, "sinks", "at most 64 named sinks (got 65)"},
		{"128 routes", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + list(128, func(i int) string { return route(i, `{"subject": "a"}`, `"s0"`) }) + `]}`, "", ""},
		{"129 routes", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + list(129, func(i int) string { return route(i, `{"subject": "a"}`, `"s0"`) }) + `]}`, "routing.routes", "at most 128 routes (got 129)"},
		{"64 targets", base + sinks(64) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `[`+list(64, func(i int) string { return fmt.Sprintf(`"s%d"`, i) })+`]`) + `]}`, "", ""},
		{"65 targets", base + sinks(64) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `[`+list(64, func(i int) string { return fmt.Sprintf(`"s%d"`, i) })+`, "s0"]`) + `]}`, "routing.routes[0].targets", "at most 64 targets (got 65)"},
		{"64 values", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"priority": [`+list(64, func(i int) string { return fmt.Sprintf(`"p%d"`, i) })+`]}`, `"s0"`) + `]}`, "", ""},
		{"65 values", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"priority": [`+list(65, func(i int) string { return fmt.Sprintf(`"p%d"`, i) })+`]}`, `"s0"`) + `]}`, "routing.routes[0].match.priority", "at most 64 values (got 65)"},
		{"16 headers", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"headers": [`+list(16, func(i int) string { return fmt.Sprintf(`{"name": "h%d", "values": "v"}`, i) })+`]}`, `"s0"`) + `]}`, "", ""},
		{"17 headers", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"headers": [`+list(17, func(i int) string { return fmt.Sprintf(`{"name": "h%d", "values": "v"}`, i) })+`]}`, `"s0"`) + `]}`, "routing.routes[0].match.headers", "at most 16 headers (got 17)"},
		{"strict true", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `{"sink": "s0", "required": false, "timeout_ms": true}`) + `]}`, "routing.routes[0].targets[0].timeout_ms", "expected integer (got boolean)"},
		{"strict name", base + sinks(1) + `, "routing": {"enabled": true, "routes": [` + route(0, `{"subject": "a"}`, `{"sink": 5}`) + `]}`, "routing.routes[0].targets[0].sink", "expected string (got number)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fanoutDoc(tt.doc)), "test.json", testRegistry(), noEnv)
			got := problemsOf(t, err)
			if tt.wantPath == "" {
				if len(got) != 0 {
					t.Fatalf("Parse problems = %v, want none", got)
				}
				return
			}
			want := Problem{Path: tt.wantPath, Message: tt.wantError}
			if len(got) == 0 || got[0] != want {
				t.Errorf("Parse problems = %v, want first %v", got, want)
			}
		})
	}
}

// TestRoutingCompactEqualsTopLevel: both forms give byte-identical
// effective configurations.
func TestRoutingCompactEqualsTopLevel(t *testing.T) {
	compact := fanoutDoc(`"sink": {"type": " FanOut ", "sinks": {"secret_archive": {"type": "postgres", "dsn": "postgres://u:pw@h/db", "password": "hunter2"}, "audit": {"type": "file", "directory": "a"}},
		"route_match_mode": "all", "no_match": "default_route", "default_targets": "secret_archive",
		"routes": [{"name": "r", "match": {"subject": "orders.>", "labels_any": "x; y"}, "targets": ["secret_archive", {"sink": "audit", "required": false, "minimum_wait_ms": 500}]}]}`)
	top := fanoutDoc(`"sink": {"type": "fanout"}, "sinks": {"secret_archive": {"type": "postgres", "dsn": "postgres://u:pw@h/db", "password": "hunter2"}, "audit": {"type": "file", "directory": "a"}},
		"routing": {"enabled": true, "mode": "all", "no_match": "default_route", "default_targets": ["secret_archive"],
		"routes": [{"name": "r", "match": {"subject": "orders.>", "labels_any": ["x", "y"]}, "targets": ["secret_archive", {"sink": "audit", "required": false, "minimum_wait_ms": 500}]}]}`)
	var outs [2]string
	for i, d := range []string{compact, top} {
		cfg, err := Parse([]byte(d), "test.json", testRegistry(), noEnv)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		b, _ := cfg.Effective()
		outs[i] = string(b)
	}
	if diff := cmp.Diff(outs[1], outs[0]); diff != "" {
		t.Errorf("compact vs top-level effective config (-top +compact):\n%s", diff)
	}
	for _, want := range []string{`"secret_archive": {`, `"hunter2"`, `"minimum_wait_ms": 500`, `"timeout_ms": 1000`, `"target_sink_types": {`, `"audit": "file"`} {
		has := strings.Contains(outs[0], want)
		if want == `"hunter2"` {
			has = !has
		}
		if !has {
			t.Errorf("effective config: %q presence wrong in\n%s", want, outs[0])
		}
	}
}

// TestNamedSinksInFileOrder: test-sink --all-named-sinks lists the named
// sinks as the file wrote them, in the top-level and the compact form;
// NamedSinkNames stays ascending.
func TestNamedSinksInFileOrder(t *testing.T) {
	sinks := `{"zeta": {"type": "file", "directory": "z"}, "alpha": {"type": "file", "directory": "a"}, "mid": {"type": "file", "directory": "m"}}`
	routes := `"routes": [{"name": "r", "match": {"subject": "orders.>"}, "targets": ["zeta", "alpha", "mid"]}]`
	for name, doc := range map[string]string{
		"top-level": fanoutDoc(`"sink": {"type": "fanout"}, "sinks": ` + sinks + `, "routing": {"enabled": true, ` + routes + `}`),
		"compact":   fanoutDoc(`"sink": {"type": "fanout", "sinks": ` + sinks + `, ` + routes + `}`),
	} {
		cfg, err := Parse([]byte(doc), "test.json", testRegistry(), noEnv)
		if err != nil {
			t.Fatalf("%s: Parse: %v", name, err)
		}
		if got, want := cfg.NamedSinksInFileOrder(), []string{"zeta", "alpha", "mid"}; !slices.Equal(got, want) {
			t.Errorf("%s: NamedSinksInFileOrder() = %v, want %v", name, got, want)
		}
		if got, want := cfg.NamedSinkNames(), []string{"alpha", "mid", "zeta"}; !slices.Equal(got, want) {
			t.Errorf("%s: NamedSinkNames() = %v, want %v", name, got, want)
		}
	}
}
