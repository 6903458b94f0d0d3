package apisurface

import (
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

const module = "github.com/nats-sinks/nats-sink"

// goList runs go list with args and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// pkgInfo is what go list says about one package.
type pkgInfo struct {
	module  string   // "" for the standard library
	imports []string // direct imports
	deps    []string // every transitive dependency
}

// listPackages returns go list's view of pkgs (patterns allowed), keyed by
// import path.
func listPackages(t *testing.T, pkgs ...string) map[string]pkgInfo {
	t.Helper()
	lines := goList(t, append([]string{"-f", "{{.ImportPath}}|{{with .Module}}{{.Path}}{{end}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}"}, pkgs...)...)
	out := map[string]pkgInfo{}
	for _, l := range lines {
		parts := strings.SplitN(l, "|", 4)
		if len(parts) != 4 {
			t.Fatalf("go list line %q", l)
		}
		out[parts[0]] = pkgInfo{module: parts[1], imports: strings.Fields(parts[2]), deps: strings.Fields(parts[3])}
	}
	return out
}

// under reports whether pkg is path or a package below it.
func under(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }

// TestSinkImports: a sink package depends only on the contract (package
// sink), its own driver and leaf helpers, never on the application: not
// config, telemetry, tracing, pipeline, runner or cli, not OpenTelemetry,
// not the embedded NATS server, not another sink, neither directly nor
// through a helper. What a sink needs from its host arrives in sink.Deps.
// Checked for every package under sinks/ except sinks/builtin, the list of
// them all. The contract itself imports only the standard library.
func TestSinkImports(t *testing.T) {
	forbidden := []string{
		module + "/config", module + "/telemetry", module + "/tracing", module + "/pipeline",
		module + "/runner", module + "/cli", module + "/sinks/builtin",
		"go.opentelemetry.io/otel", "github.com/nats-io/nats-server/v2",
	}
	pkgs := listPackages(t, module+"/sinks/...", module+"/sink")
	checked := 0
	for path, p := range pkgs {
		if path == module+"/sink" || under(path, module+"/sinks/builtin") {
			continue
		}
		checked++
		own, _, _ := strings.Cut(strings.TrimPrefix(path, module+"/sinks/"), "/")
		for _, d := range p.deps {
			for _, f := range forbidden {
				if under(d, f) {
					t.Errorf("%s depends on %s: a sink gets what it needs from its host through sink.Deps", path, d)
				}
			}
			if under(d, module+"/sinks") && !under(d, module+"/sinks/"+own) {
				t.Errorf("%s depends on %s: a sink imports no other sink", path, d)
			}
		}
	}
	if checked < len(builtin.Registry().Names()) {
		t.Errorf("checked %d sink packages, fewer than the %d built-in sinks", checked, len(builtin.Registry().Names()))
	}
	var nonStd []string
	for _, l := range goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"/sink") {
		if l != "" && l != module+"/sink" {
			nonStd = append(nonStd, l)
		}
	}
	if len(nonStd) > 0 {
		t.Errorf("package sink imports more than the standard library: %v", nonStd)
	}
}

// sinkPackages returns, per built-in sink type, the import path of the
// package its Decoder belongs to: the list comes from the registry, so a
// new sink is checked as soon as it is registered.
func sinkPackages(t *testing.T) map[string]string {
	t.Helper()
	reg := builtin.Registry()
	out := map[string]string{}
	for _, name := range reg.Names() {
		dec, _ := reg.Lookup(name)
		fn := runtime.FuncForPC(reflect.ValueOf(dec).Pointer()).Name() // ".../sinks/file.Decode"
		slash := strings.LastIndex(fn, "/")
		dot := strings.Index(fn[slash+1:], ".")
		if slash < 0 || dot < 0 {
			t.Fatalf("sink %q: cannot tell the package of its Decoder %s", name, fn)
		}
		out[name] = fn[:slash+1+dot]
	}
	return out
}

// TestImportHygiene checks that a program importing the sink contract, the
// runner and one sink pulls in no other sink's driver and no embedded NATS
// server: library users pay only for what they use (docs/library.md). A
// sink's driver is every module outside this one that the sink package
// imports directly and that the contract and the runner do not already
// need. The sinks come from builtin.Registry().
func TestImportHygiene(t *testing.T) {
	sinks := sinkPackages(t)
	paths := []string{module + "/sink", module + "/runner"}
	for _, p := range sinks {
		paths = append(paths, p)
	}
	info := listPackages(t, paths...)
	moduleOf := map[string]string{}
	for _, l := range goList(t, append([]string{"-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}"}, paths...)...) {
		path, mod, _ := strings.Cut(l, " ")
		moduleOf[path] = mod
	}
	base := map[string]bool{}
	for _, p := range []string{module + "/sink", module + "/runner"} {
		base[p] = true
		for _, d := range info[p].deps {
			base[d] = true
		}
	}
	baseModules := map[string]bool{}
	for d := range base {
		baseModules[moduleOf[d]] = true
	}
	drivers := map[string][]string{} // sink type -> its driver modules
	for name, p := range sinks {
		for _, imp := range info[p].imports {
			if m := moduleOf[imp]; m != "" && m != module && !baseModules[m] && !slices.Contains(drivers[name], m) {
				drivers[name] = append(drivers[name], m)
			}
		}
	}
	for name, p := range sinks {
		deps := append([]string{p}, info[p].deps...)
		for d := range base {
			deps = append(deps, d)
		}
		reported := map[string]bool{}
		for _, d := range deps {
			if under(d, "github.com/nats-io/nats-server/v2") || under(d, module+"/cli") || under(d, module+"/sinks/builtin") {
				t.Errorf("importing sinks/%s pulls in %s", name, d)
			}
			m := moduleOf[d]
			for other, ms := range drivers {
				if other != name && slices.Contains(ms, m) && !slices.Contains(drivers[name], m) && !reported[m] {
					reported[m] = true
					t.Errorf("importing sinks/%s pulls in %s (module %s, the driver of sinks/%s)", name, d, m, other)
				}
			}
		}
	}
	// The derivation must find the drivers it is there to keep apart.
	for _, want := range []struct{ sink, module string }{
		{"postgres", "github.com/jackc/pgx/v5"}, {"kafka", "github.com/twmb/franz-go"}, {"sqlite", "modernc.org/sqlite"},
	} {
		if !slices.Contains(drivers[want.sink], want.module) {
			t.Errorf("drivers of sinks/%s = %v, want %s among them", want.sink, drivers[want.sink], want.module)
		}
	}
}
