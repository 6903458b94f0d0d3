package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

// TestBenchSummary: with several rounds, a phase's rate is the median of
// its rounds' rates and its % of ceiling the median of each round's own
// ratio (not the ratio of the medians).
func TestBenchSummary(t *testing.T) {
	round := func(ceiling, pipe float64) []benchRow {
		return []benchRow{
			{"publish", 100, 1},
			{"consume+ack ceiling", 100, 100 / ceiling},
			{"pipeline (x)", 100, 100 / pipe},
		}
	}
	got := summarise([][]benchRow{round(100, 50), round(200, 60), round(100, 45)})
	if len(got) != 3 || !math.IsNaN(got[0].Percent) {
		t.Fatalf("phases = %+v, want 3 with no %% for publish", got)
	}
	p := got[2]
	if math.Abs(p.Rate-50) > 1e-9 || math.Abs(p.Percent-45) > 1e-9 {
		t.Errorf("pipeline rate %.3f, %% of ceiling %.3f; want 50 (median rate) and 45 (median of 50, 30, 45)", p.Rate, p.Percent)
	}
	if c := got[1]; math.Abs(c.Rate-100) > 1e-9 || c.Percent != 100 {
		t.Errorf("ceiling = %+v, want rate 100 and 100 %%", c)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", m)
	}
}

// runBenchJSON runs `nats-sink bench ARGS --format json` in-process with
// TMPDIR set to a fresh directory (where --keep leaves the destinations)
// and returns the table rows by phase and that directory.
func runBenchJSON(t *testing.T, args ...string) (map[string]map[string]any, string) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	env := &Env{Stdout: &stdout, Stderr: &stderr, Getenv: os.LookupEnv}
	if code := Run(append(append([]string{"bench"}, args...), "--format", "json"), env); code != 0 {
		t.Fatalf("bench %v: exit %d\nstderr: %s", args, code, stderr.String())
	}
	var out struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("bench output %q: %v", stdout.String(), err)
	}
	rows := map[string]map[string]any{}
	for _, r := range out.Rows {
		rows[r["phase"].(string)] = r
	}
	return rows, tmp
}

// wantPhases fails unless every phase is in rows with msgs messages.
func wantPhases(t *testing.T, rows map[string]map[string]any, msgs int, phases ...string) {
	t.Helper()
	for _, p := range phases {
		r, ok := rows[p]
		if !ok {
			names := make([]string, 0, len(rows))
			for n := range rows {
				names = append(names, n)
			}
			slices.Sort(names)
			t.Errorf("no row %q; rows: %q", p, names)
			continue
		}
		if got := r["msgs"].(float64); int(got) != msgs {
			t.Errorf("row %q: msgs = %v, want %d", p, got, msgs)
		}
	}
}

// wantVersus fails unless phase has a ratio to the given comparison.
func wantVersus(t *testing.T, rows map[string]map[string]any, phase, versus string) {
	t.Helper()
	ratio, _ := rows[phase]["ratio"].(map[string]any)
	if ratio == nil || ratio["versus"] != versus {
		t.Errorf("row %q: ratio = %v, want one versus %q", phase, ratio, versus)
		return
	}
	if m, _ := ratio["median"].(float64); m <= 0 {
		t.Errorf("row %q: ratio median = %v, want > 0", phase, ratio["median"])
	}
}

// keptDirs returns the directories --keep left under tmp whose names
// start with prefix (a sink phase's destination: "file-hmac-sink-…").
func keptDirs(t *testing.T, tmp, prefix string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(tmp, "nats-sink-bench-*", prefix+"*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no kept directory %s* under %s (%v)", prefix, tmp, err)
	}
	return dirs
}

// fileRecords reads every file record under dir.
func fileRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var rec map[string]any
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBenchIntegrity: --integrity runs every pipeline phase once per
// variant on one stream of signed messages; each variant stores every
// message (so every signature verified: a rejected message is never
// stored), custody documents appear exactly in the custody variants with
// the producer's chain link, and each variant's ratio is to its sink's
// off phase.
func TestBenchIntegrity(t *testing.T) {
	const n = 300
	rows, tmp := runBenchJSON(t, "--messages", "300", "--batch-size", "100", "--in-flight", "2",
		"--sink", "null", "--sink", "file", "--integrity", "off,hmac", "--integrity", "ed25519,custody,all", "--keep")
	for _, s := range []string{"null", "file"} {
		wantPhases(t, rows, n, phaseName(s, "off"))
		for _, v := range []string{"hmac", "ed25519", "custody", "all"} {
			wantPhases(t, rows, n, phaseName(s, v))
			wantVersus(t, rows, phaseName(s, v), phaseName(s, "off"))
		}
	}
	for _, v := range integrityVariants {
		prefix := "file-" + v + "-sink-"
		if v == "off" {
			prefix = "file-sink-"
		}
		dirs := keptDirs(t, tmp, prefix)
		recs := fileRecords(t, dirs[0])
		if len(recs) != n {
			t.Errorf("%s: %d records, want %d", v, len(recs), n)
		}
		links := 0
		for _, rec := range recs {
			c, _ := rec["custody"].(map[string]any)
			if wantCustody := v == "custody" || v == "all"; (c != nil) != wantCustody {
				t.Fatalf("%s: record custody = %v, want present %t", v, rec["custody"], wantCustody)
			}
			if c != nil && c["previous_record_hash"] != nil {
				links++
			}
		}
		if (v == "custody" || v == "all") && links != n-1 {
			t.Errorf("%s: %d records carry a previous_record_hash, want %d (all but the first message)", v, links, n-1)
		}
	}
}

// TestBenchIntegrityUnsigned: a bench pipeline that verifies signatures
// does not store unsigned messages, so the integrity phases' counts above
// depend on the publisher's signatures being valid.
func TestBenchIntegrityUnsigned(t *testing.T) {
	o := &benchOptions{keys: newBenchKeys()}
	good := o.keys.headers("s.m", []byte(`{"i":1}`), "")
	other := newBenchKeys()
	bad := other.headers("s.m", []byte(`{"i":1}`), "")
	if good.Get("Nats-Sinks-Authenticity-Signature") == bad.Get("Nats-Sinks-Authenticity-Signature") {
		t.Fatal("two keys gave the same HMAC signature")
	}
	if v, ok := o.keys.lookup(benchHMACEnv); !ok || v == "" {
		t.Errorf("lookup(%s) = %q, %t; want the key", benchHMACEnv, v, ok)
	}
	if _, ok := (*benchKeys)(nil).lookup(benchHMACEnv); ok {
		t.Error("nil keys resolved a variable")
	}
}

// TestBenchFanoutGate: a fan-out phase brings its targets' phases alone
// into the same run, and its ratio is to the slowest of them; two null
// targets isolate the gate from any disk. Each file-backed target of a
// fan-out holds every message once.
func TestBenchFanoutGate(t *testing.T) {
	const n = 300
	rows, tmp := runBenchJSON(t, "--messages", "300", "--batch-size", "100", "--in-flight", "2",
		"--sink", "fanout-null-null", "--sink", "fanout-file-sqlite", "--bare-sql", "off", "--keep")
	wantPhases(t, rows, n, "pipeline (null)", "pipeline (fanout-null-null)", "pipeline (file)", "pipeline (sqlite)", "pipeline (fanout-file-sqlite)")
	wantVersus(t, rows, "pipeline (fanout-null-null)", "pipeline (null)")
	wantVersus(t, rows, "pipeline (fanout-file-sqlite)", "slowest of pipeline (file), pipeline (sqlite)")
	dir := keptDirs(t, tmp, "fanout-file-sqlite-sink-")[0]
	if recs := fileRecords(t, filepath.Join(dir, "a")); len(recs) != n {
		t.Errorf("fan-out file target: %d records, want %d", len(recs), n)
	}
	if got := sqliteCount(t, filepath.Join(dir, "b.db"), "nats_sink_events"); got != n {
		t.Errorf("fan-out sqlite target: %d rows, want %d", got, n)
	}
	if got := withFanoutTargets([]string{"file", "fanout-file-sqlite", "fanout-file-file"}); !slices.Equal(got, []string{"file", "sqlite", "fanout-file-sqlite", "fanout-file-file"}) {
		t.Errorf("withFanoutTargets = %q", got)
	}
}

func sqliteCount(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("select count(*) from " + table).Scan(&n); err != nil {
		t.Fatalf("count %s in %s: %v", table, path, err)
	}
	return n
}

// TestBenchBareSQLite: --sink sqlite adds the bare phases (every method
// with --bare-sql all, the fastest by default), the pipeline's ratio is
// to the fastest of them, and the bare table holds one row per message in
// the layout the pipeline's table has.
func TestBenchBareSQLite(t *testing.T) {
	const n = 300
	rows, tmp := runBenchJSON(t, "--messages", "300", "--batch-size", "100", "--sink", "sqlite", "--bare-sql", "all", "--keep")
	wantPhases(t, rows, n, "sqlite (bare, values)", "sqlite (bare, prepared)", "pipeline (sqlite)")
	wantVersus(t, rows, "pipeline (sqlite)", "fastest of sqlite (bare, values), sqlite (bare, prepared)")
	if _, ok := rows["sqlite (bare, copy)"]; ok {
		t.Error("a copy phase for SQLite")
	}
	bare, _ := filepath.Glob(filepath.Join(tmp, "nats-sink-bench-*", "sqlite-sink-*", "nats-sink-bench-bare-*.db"))
	if len(bare) != 1 {
		t.Fatalf("bare databases %q, want one", bare)
	}
	db, err := sql.Open("sqlite", "file:"+bare[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var table string
	if err := db.QueryRow("select name from sqlite_master where type = 'table' and name like 'nats_sink_bench_bare_%'").Scan(&table); err != nil {
		t.Fatal(err)
	}
	if got := sqliteCount(t, bare[0], table); got != n {
		t.Errorf("bare table: %d rows, want %d", got, n)
	}
	pipes, _ := filepath.Glob(filepath.Join(tmp, "nats-sink-bench-*", "sqlite-sink-*", "bench.db"))
	if len(pipes) == 0 {
		t.Fatal("no pipeline database kept")
	}
	pipe := pipes[len(pipes)-1]
	if got := sqliteCount(t, pipe, "nats_sink_events"); got != n {
		t.Errorf("pipeline table: %d rows, want %d", got, n)
	}
	if got, want := sqliteColumns(t, bare[0], table), sqliteColumns(t, pipe, "nats_sink_events"); !slices.Equal(got, want) {
		t.Errorf("bare columns %q, pipeline columns %q", got, want)
	}

	rows, _ = runBenchJSON(t, "--messages", "200", "--batch-size", "100", "--sink", "sqlite")
	wantPhases(t, rows, 200, "sqlite (bare, "+bestBare[sqlmodel.SQLite]+")")
	wantVersus(t, rows, "pipeline (sqlite)", "sqlite (bare, "+bestBare[sqlmodel.SQLite]+")")
}

func sqliteColumns(t *testing.T, path, table string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Query("select name from pragma_table_info(?)", table)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var s string
		r.Scan(&s)
		out = append(out, s)
	}
	return out
}
