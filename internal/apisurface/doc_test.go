package apisurface

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocComments requires a package doc and a doc comment on every exported
// function, type, method, and const/var group of each public package, so that
// `go doc` reads as a manual (docs/library.md).
func TestDocComments(t *testing.T) {
	for _, pkg := range publicPackages(t) {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			var files []*ast.File
			for _, f := range p.Files {
				files = append(files, f)
			}
			d, err := doc.NewFromFiles(fset, files, "github.com/nats-sinks/nats-sink/"+pkg)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(d.Doc) == "" {
				t.Errorf("%s: no package doc comment", pkg)
			}
			missing := func(kind, name, text string) {
				if strings.TrimSpace(text) == "" {
					t.Errorf("%s: %s %s has no doc comment", pkg, kind, name)
				}
			}
			values := func(vs []*doc.Value) {
				for _, v := range vs {
					missing("const/var", strings.Join(v.Names, ", "), v.Doc)
				}
			}
			values(d.Consts)
			values(d.Vars)
			for _, f := range d.Funcs {
				missing("func", f.Name, f.Doc)
			}
			for _, ty := range d.Types {
				missing("type", ty.Name, ty.Doc)
				values(ty.Consts)
				values(ty.Vars)
				for _, f := range ty.Funcs {
					missing("func", f.Name, f.Doc)
				}
				for _, m := range ty.Methods {
					missing("method", ty.Name+"."+m.Name, m.Doc)
				}
			}
		}
	}
}
