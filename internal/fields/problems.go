package fields

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/sink"
)

// Problems collects configuration problems and reports them in schema order
// (docs/configuration.md#how-a-file-is-loaded): keys in struct-field order, array items by index,
// several problems at one path in the order they were added. The zero value
// is ready to use.
//
// Order is not recorded when a problem is added but computed by List from
// the path and the struct type that Decode registered for the path's root,
// so problems found later by hand-written Validate methods still sort into
// place.
type Problems struct {
	items []sink.Problem
	roots map[string]reflect.Type
}

// Add records one problem at path. Messages are lower-case and never carry
// secret values.
func (p *Problems) Add(path, msg string) {
	p.items = append(p.items, sink.Problem{Path: displayPath(path), Message: msg})
}

// Addf records one problem at path with a formatted message.
func (p *Problems) Addf(path, format string, args ...any) {
	p.Add(path, fmt.Sprintf(format, args...))
}

// Err returns the problems as a *sink.ConfigError in schema order, or nil
// when there are none.
func (p *Problems) Err() error {
	if p.Len() == 0 {
		return nil
	}
	return &sink.ConfigError{Problems: p.List()}
}

// Len returns the number of problems recorded so far.
func (p *Problems) Len() int { return len(p.items) }

// List returns the problems in schema order. Unknown keys sort after the
// known keys of their object; map entries keep the order they were added in.
func (p *Problems) List() []sink.Problem {
	type keyed struct {
		key []int
		pr  sink.Problem
	}
	ks := make([]keyed, len(p.items))
	for i, it := range p.items {
		ks[i] = keyed{p.orderKey(it.Path), it}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return slices.Compare(a.key, b.key) })
	out := make([]sink.Problem, len(ks))
	for i, k := range ks {
		out[i] = k.pr
	}
	return out
}

// register remembers that path holds a value of type t, so that List can
// order problems below it.
func (p *Problems) register(path string, t reflect.Type) {
	if p.roots == nil {
		p.roots = map[string]reflect.Type{}
	}
	if _, ok := p.roots[path]; !ok {
		p.roots[path] = t
	}
}

func displayPath(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// orderKey walks path through the type registered for its shortest
// registered prefix (the outermost Decode call) and returns the field
// positions and indices it passes.
func (p *Problems) orderKey(path string) []int {
	if path == "(root)" {
		path = ""
	}
	root, rt := "", reflect.Type(nil)
	for pre, t := range p.roots {
		if !hasPathPrefix(path, pre) {
			continue
		}
		if rt == nil || len(pre) < len(root) {
			root, rt = pre, t
		}
	}
	if rt == nil {
		return nil
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(path, root), ".")
	return walk(rt, rest)
}

func hasPathPrefix(path, pre string) bool {
	if pre == "" || path == pre {
		return true
	}
	return strings.HasPrefix(path, pre) && len(path) > len(pre) && (path[len(pre)] == '.' || path[len(pre)] == '[')
}

func walk(t reflect.Type, rest string) []int {
	var key []int
	for rest != "" {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Struct:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			seg := rest[:end]
			info := structInfo(t)
			f := info.field(seg)
			if f == nil {
				return append(key, len(info.fields))
			}
			key = append(key, f.pos)
			t = f.typ
			rest = strings.TrimPrefix(rest[end:], ".")
		case reflect.Slice:
			if !strings.HasPrefix(rest, "[") {
				return key
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return key
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil {
				return key
			}
			key = append(key, i)
			t = t.Elem()
			rest = strings.TrimPrefix(rest[end+1:], ".")
		default:
			return key
		}
	}
	return key
}
