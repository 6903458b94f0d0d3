package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

const configDoc = "../docs/configuration.md"

const (
	beginGenerated = "<!-- BEGIN GENERATED: key reference (go test ./cli -run TestConfigurationDoc) -->"
	endGenerated   = "<!-- END GENERATED -->"
)

// TestConfigurationDoc keeps the key reference in docs/configuration.md in
// step with the configuration types: the tables are generated from the same
// JSON Schema that `nats-sink schema` prints. Regenerate with
// NATS_SINK_UPDATE=1 go test ./cli -run TestConfigurationDoc.
func TestConfigurationDoc(t *testing.T) {
	raw, err := config.Schema(builtin.Prototypes())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := jsonx.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	root := tree.(map[string]any)
	props := root["properties"].(map[string]any)
	for _, section := range []string{"nats", "consumer_management", "delivery", "dead_letter", "logging", "metrics", "message_metadata", "encryption", "tracing", "message_authenticity", "custody"} {
		writeSection(&b, section, props[section].(map[string]any))
	}
	for _, variant := range props["sink"].(map[string]any)["oneOf"].([]any) {
		v := variant.(map[string]any)
		typ := v["properties"].(map[string]any)["type"].(map[string]any)["const"]
		writeSection(&b, fmt.Sprintf("sink (type %q)", typ), v)
	}
	generated := beginGenerated + "\n" + b.String() + endGenerated

	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	start, end := bytes.Index(doc, []byte(beginGenerated)), bytes.Index(doc, []byte(endGenerated))
	if start < 0 || end < start {
		t.Fatalf("%s lacks the generated-section markers", configDoc)
	}
	updated := append(append(append([]byte{}, doc[:start]...), generated...), doc[end+len(endGenerated):]...)
	if os.Getenv("NATS_SINK_UPDATE") != "" {
		if err := os.WriteFile(configDoc, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, updated) {
		t.Errorf("%s key reference is stale; regenerate with: NATS_SINK_UPDATE=1 go test ./cli -run TestConfigurationDoc", configDoc)
	}
}

func writeSection(b *strings.Builder, name string, schema map[string]any) {
	fmt.Fprintf(b, "\n### `%s`\n\n", name)
	if d, ok := schema["description"].(string); ok {
		b.WriteString(cleanDescription(d) + "\n\n")
	}
	b.WriteString("| Key | Type | Default | Rules and meaning |\n|---|---|---|---|\n")
	writeRows(b, "", schema)
}

func writeRows(b *strings.Builder, prefix string, schema map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	required, _ := schema["required"].([]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := props[k].(map[string]any)
		var rules []string
		if slices.Contains(required, any(k)) {
			rules = append(rules, "**required**")
		}
		if e, ok := p["enum"].([]any); ok {
			var vals []string
			for _, v := range e {
				vals = append(vals, "`"+string(jsonx.Marshal(v, jsonx.UTF8))+"`")
			}
			rules = append(rules, "one of "+strings.Join(vals, ", "))
		}
		if c, ok := p["const"]; ok {
			rules = append(rules, "`"+string(jsonx.Marshal(c, jsonx.UTF8))+"`")
		}
		lo, hasLo := p["minimum"]
		if xlo, ok := p["exclusiveMinimum"]; ok {
			lo, hasLo = fmt.Sprintf("> %v", xlo), true
		}
		hi, hasHi := p["maximum"]
		switch {
		case hasLo && hasHi:
			rules = append(rules, fmt.Sprintf("%v .. %v", lo, hi))
		case hasLo:
			rules = append(rules, fmt.Sprintf("≥ %v", lo))
		case hasHi:
			rules = append(rules, fmt.Sprintf("≤ %v", hi))
		}
		if pat, ok := p["pattern"].(string); ok {
			rules = append(rules, "matches `"+pat+"`")
		}
		if d, ok := p["description"].(string); ok {
			if d = cleanDescription(d); d != "" {
				rules = append(rules, d)
			}
		}
		def := ""
		if d, ok := p["default"]; ok {
			def = "`" + string(jsonx.Marshal(d, jsonx.UTF8)) + "`"
		}
		fmt.Fprintf(b, "| `%s%s` | %s | %s | %s |\n", prefix, k, typeName(p), def, strings.ReplaceAll(strings.Join(rules, "; "), "|", "\\|"))
		if _, nested := p["properties"]; nested && k != "type" {
			writeRows(b, prefix+k+".", p)
		}
	}
}

func typeName(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		if t == "array" {
			if items, ok := p["items"].(map[string]any); ok {
				return "array of " + typeName(items)
			}
		}
		return t
	case []any:
		var names []string
		for _, n := range t {
			names = append(names, fmt.Sprint(n))
		}
		return strings.Join(names, " or ")
	}
	if _, ok := p["oneOf"]; ok {
		return "see below"
	}
	return ""
}

// cleanDescription drops the per-key coercion note, which the page explains
// once, and flattens newlines for a table cell.
func cleanDescription(d string) string {
	if i := strings.Index(d, "Also accepted (compat)"); i >= 0 {
		d = d[:i]
	}
	return strings.TrimSpace(strings.ReplaceAll(d, "\n", " "))
}
