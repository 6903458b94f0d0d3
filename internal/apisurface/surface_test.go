package apisurface

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// root is the repository root, relative to this package.
const root = "../.."

// publicPackages are the directories whose exported identifiers form the
// library's API (docs/library.md). Anything else lives under internal/.
func publicPackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/nats-sinks/nats-sink/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") ||
			strings.HasPrefix(rel, "cmd/") || rel == "e2e" || strings.HasSuffix(rel, "test") && rel != "sink/sinktest" {
			continue
		}
		pkgs = append(pkgs, rel)
	}
	sort.Strings(pkgs)
	return pkgs
}

// TestPublicAPI compares each public package's exported identifiers with
// api/<path with / as _>.txt. Regenerate deliberately with
// NATS_SINK_UPDATE=1 go test ./internal/apisurface.
func TestPublicAPI(t *testing.T) {
	update := os.Getenv("NATS_SINK_UPDATE") == "1"
	seen := map[string]bool{}
	for _, pkg := range publicPackages(t) {
		golden := filepath.Join(root, "api", strings.ReplaceAll(pkg, "/", "_")+".txt")
		seen[filepath.Base(golden)] = true
		got := surface(t, filepath.Join(root, pkg))
		if update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s is public but has no API listing %s (run NATS_SINK_UPDATE=1 go test ./internal/apisurface)", pkg, golden)
			continue
		}
		if string(want) != got {
			t.Errorf("public API of %s changed; if deliberate, regenerate %s with NATS_SINK_UPDATE=1 and note it in docs/library.md:\n%s",
				pkg, golden, diffLines(string(want), got))
		}
	}
	listings, _ := filepath.Glob(filepath.Join(root, "api", "*.txt"))
	for _, l := range listings {
		if !seen[filepath.Base(l)] {
			if update {
				os.Remove(l)
				continue
			}
			t.Errorf("%s lists a package that is no longer public", l)
		}
	}
}

// TestNoInternalTypes: no exported declaration of a public package names a
// type of an internal package (a parameter, a result, a field, an embedded
// struct, an interface method): a library user cannot name such a type,
// so an API that needs one cannot be used from outside the module.
func TestNoInternalTypes(t *testing.T) {
	for _, pkg := range publicPackages(t) {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for name, f := range p.Files {
				internal := map[string]string{} // local import name -> path, for internal packages
				for _, imp := range f.Imports {
					path := strings.Trim(imp.Path.Value, `"`)
					if !strings.Contains(path, "/internal/") && !strings.HasSuffix(path, "/internal") {
						continue
					}
					local := path[strings.LastIndex(path, "/")+1:]
					if imp.Name != nil {
						local = imp.Name.Name
					}
					internal[local] = path
				}
				if len(internal) == 0 {
					continue
				}
				report := func(what string, n ast.Node) {
					ast.Inspect(n, func(n ast.Node) bool {
						if sel, ok := n.(*ast.SelectorExpr); ok {
							if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
								t.Errorf("%s: %s uses %s.%s of internal package %s", filepath.Join(pkg, filepath.Base(name)), what, id.Name, sel.Sel.Name, internal[id.Name])
							}
						}
						return true
					})
				}
				for _, decl := range f.Decls {
					switch d := decl.(type) {
					case *ast.FuncDecl:
						if !d.Name.IsExported() || d.Recv != nil && len(d.Recv.List) > 0 && !exportedRecv(d.Recv.List[0].Type) {
							continue
						}
						report("func "+d.Name.Name, d.Type)
					case *ast.GenDecl:
						for _, spec := range d.Specs {
							switch s := spec.(type) {
							case *ast.TypeSpec:
								if !s.Name.IsExported() {
									continue
								}
								if st, ok := s.Type.(*ast.StructType); ok {
									for _, fl := range st.Fields.List {
										if len(fl.Names) == 0 || slices.ContainsFunc(fl.Names, func(n *ast.Ident) bool { return n.IsExported() }) {
											report("type "+s.Name.Name+" field", fl.Type)
										}
									}
									continue
								}
								report("type "+s.Name.Name, s.Type)
							case *ast.ValueSpec:
								if s.Type != nil && slices.ContainsFunc(s.Names, func(n *ast.Ident) bool { return n.IsExported() }) {
									report("var/const "+s.Names[0].Name, s.Type)
								}
							}
						}
					}
				}
			}
		}
	}
}

// surface renders one line per exported declaration of the package in dir
// (tests excluded): functions and methods with their signatures, types with
// their exported fields and interface methods, constants and variables.
func surface(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	var lines []string
	node := func(n any) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					recv := ""
					if d.Recv != nil && len(d.Recv.List) > 0 {
						rt := d.Recv.List[0].Type
						if !exportedRecv(rt) {
							continue
						}
						recv = "(" + node(rt) + ") "
					}
					lines = append(lines, "func "+recv+d.Name.Name+strings.TrimPrefix(node(d.Type), "func"))
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							lines = append(lines, typeLines(s, node)...)
						case *ast.ValueSpec:
							kind := "var"
							if d.Tok == token.CONST {
								kind = "const"
							}
							for _, n := range s.Names {
								if n.IsExported() {
									lines = append(lines, kind+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func exportedRecv(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.StarExpr:
		return exportedRecv(x.X)
	case *ast.Ident:
		return x.IsExported()
	case *ast.IndexExpr:
		return exportedRecv(x.X)
	case *ast.IndexListExpr:
		return exportedRecv(x.X)
	}
	return false
}

func typeLines(s *ast.TypeSpec, node func(any) string) []string {
	name := s.Name.Name
	switch tt := s.Type.(type) {
	case *ast.StructType:
		lines := []string{"type " + name + " struct"}
		for _, f := range tt.Fields.List {
			if len(f.Names) == 0 { // embedded
				lines = append(lines, "field "+name+"."+node(f.Type))
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					lines = append(lines, "field "+name+"."+n.Name+" "+node(f.Type))
				}
			}
		}
		return lines
	case *ast.InterfaceType:
		lines := []string{"type " + name + " interface"}
		for _, m := range tt.Methods.List {
			if len(m.Names) == 0 {
				lines = append(lines, "method "+name+"."+node(m.Type))
				continue
			}
			for _, n := range m.Names {
				lines = append(lines, "method "+name+"."+n.Name+strings.TrimPrefix(node(m.Type), "func"))
			}
		}
		return lines
	default:
		eq := " "
		if s.Assign.IsValid() {
			eq = " = "
		}
		return []string{"type " + name + eq + node(s.Type)}
	}
}

// diffLines lists the lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	return b.String()
}
