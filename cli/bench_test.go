package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/nats-sinks/nats-sink/internal/natstest"
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
	for _, p := range []string{"consume+ack ceiling", "pipeline (null)", "pipeline (fanout-null-null)"} {
		c, _ := rows[p]["cpu_us_per_message"].(map[string]any)
		if _, ok := c["bench_process"].(float64); !ok || c["database_processes"] != nil {
			t.Errorf("row %q: cpu_us_per_message = %v, want the bench process's only", p, rows[p]["cpu_us_per_message"])
		}
	}
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
	wantPhases(t, rows, n, "sqlite (bare, values)", "sqlite (bare, values100)", "sqlite (bare, prepared)", "pipeline (sqlite)")
	wantVersus(t, rows, "pipeline (sqlite)", "fastest of sqlite (bare, values), sqlite (bare, values100), sqlite (bare, prepared)")
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

// benchServer is a SQL server for the bare-phase tests: the sink keys of
// a bench configuration and an admin connection.
type benchServer struct {
	sinkKeys string
	query    func(q string) ([]string, error) // first column of each row, as text
	exec     func(q string) error
	tables   string // query listing the bare tables
	quote    func(string) string
}

func postgresBenchServer(t *testing.T) *benchServer {
	dsn := natstest.Service(t, "NATS_SINKS_TEST_POSTGRES_DSN")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	pw, _ := u.User.Password()
	port, _ := strconv.Atoi(u.Port())
	keys := fmt.Sprintf(`"type": "postgres", "host": %q, "port": %d, "database": %q, "user": %q, "sslmode": "disable"`,
		u.Hostname(), port, strings.TrimPrefix(u.Path, "/"), u.User.Username())
	if pw != "" {
		keys += fmt.Sprintf(`, "password": %q`, pw)
	}
	return &benchServer{
		sinkKeys: keys,
		query: func(q string) ([]string, error) {
			rows, err := conn.Query(context.Background(), q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				v, err := rows.Values()
				if err != nil {
					return nil, err
				}
				out = append(out, fmt.Sprint(v[0]))
			}
			return out, rows.Err()
		},
		exec: func(q string) error {
			_, err := conn.Exec(context.Background(), q)
			return err
		},
		tables: "select table_name::text from information_schema.tables where table_name like 'nats_sink_bench_bare_%'",
		quote:  sqlmodel.Postgres.Quote,
	}
}

// mysqlBenchServer connects as NATS_SINKS_TEST_MYSQL_DSN's user; the sink
// needs a password, so without one it creates a bench user that has one.
func mysqlBenchServer(t *testing.T) *benchServer {
	dsn := natstest.Service(t, "NATS_SINKS_TEST_MYSQL_DSN")
	dc, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	user, pw := dc.User, dc.Passwd
	if pw == "" {
		user, pw = "nats_sink_bench", "nats-sink-bench-pw"
		for _, h := range []string{"%", "localhost"} {
			for _, q := range []string{
				fmt.Sprintf("create user if not exists '%s'@'%s' identified by '%s'", user, h, pw),
				fmt.Sprintf("grant all on `%s`.* to '%s'@'%s'", dc.DBName, user, h),
			} {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
	}
	host, port, _ := net.SplitHostPort(dc.Addr)
	return &benchServer{
		sinkKeys: fmt.Sprintf(`"type": "mysql", "host": %q, "port": %s, "database": %q, "user": %q, "password": %q`, host, port, dc.DBName, user, pw),
		query: func(q string) ([]string, error) {
			rows, err := db.Query(q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, rows.Err()
		},
		exec: func(q string) error {
			_, err := db.Exec(q)
			return err
		},
		tables: "select table_name from information_schema.tables where table_schema = database() and table_name like 'nats_sink_bench_bare_%'",
		quote:  sqlmodel.MySQL.Quote,
	}
}

// TestBenchBareServers: with --config of a PostgreSQL or MariaDB sink (audit
// and mapped layout), bench runs one bare phase per method the database
// supports next to the pipeline, each leaving one row per message in a
// fresh table of the sink's layout (kept here with --keep, dropped
// otherwise), and the pipeline's ratio is to the fastest of them.
func TestBenchBareServers(t *testing.T) {
	mapped := `, "mode": "upsert", "layout": "mapped", "idempotency": {"strategy": "mapping", "columns": ["i"]},
  "include_columns": ["stream_sequence"], "version_column": "stream_sequence",
  "mapping": [{"column": "i", "path": "/i", "type": "bigint", "required": true}, {"column": "pad", "path": "/pad", "type": "text"},
   {"column": "subj", "path": "$subject", "type": "text"}, {"column": "at", "path": "$received_at", "type": "timestamp"}]`
	for _, tc := range []struct {
		name, dialect string
		server        func(*testing.T) *benchServer
		methods       []string
		layout        string
	}{
		{"postgres audit", "postgres", postgresBenchServer, []string{"copy", "unnest", "values", "values100", "prepared"}, ""},
		{"postgres mapped", "postgres", postgresBenchServer, []string{"copy", "values", "values100", "prepared"}, mapped},
		{"mysql audit", "mysql", mysqlBenchServer, []string{"values", "values100", "prepared"}, ""},
		{"mysql mapped", "mysql", mysqlBenchServer, []string{"values", "values100", "prepared"}, mapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 250
			srv := tc.server(t)
			table := "bench_test_" + randomHex(8)
			t.Cleanup(func() { srv.exec("drop table if exists " + srv.quote(table)) })
			before, err := srv.query(srv.tables)
			if err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(t.TempDir(), "bench.json")
			doc := fmt.Sprintf(`{"nats": {"stream": "X", "consumer": "x", "subject": "x.>"},
 "sink": {%s, "auto_create": true, "table": %q%s}}`, srv.sinkKeys, table, tc.layout)
			if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			rows, _ := runBenchJSON(t, "--config", cfg, "--server", "embedded", "--messages", "250", "--batch-size", "100",
				"--sink", tc.dialect, "--bare-sql", "all", "--keep")
			var bare []string
			for _, m := range tc.methods {
				bare = append(bare, tc.dialect+" (bare, "+m+")")
			}
			wantPhases(t, rows, n, append(bare, "pipeline ("+tc.dialect+")")...)
			wantVersus(t, rows, "pipeline ("+tc.dialect+")", "fastest of "+strings.Join(bare, ", "))
			for _, p := range append(bare, "pipeline ("+tc.dialect+")") {
				c, _ := rows[p]["cpu_us_per_message"].(map[string]any)
				if _, ok := c["database_processes"].(float64); !ok {
					t.Errorf("row %q: cpu_us_per_message = %v, want the database's", p, rows[p]["cpu_us_per_message"])
				}
			}
			if got, err := srv.query("select count(*) from " + srv.quote(table)); err != nil || len(got) != 1 || got[0] != strconv.Itoa(n) {
				t.Errorf("pipeline table holds %v rows (%v), want %d", got, err, n)
			}
			after, err := srv.query(srv.tables)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, name := range after {
				if !slices.Contains(before, name) {
					kept = append(kept, name)
					t.Cleanup(func() { srv.exec("drop table if exists " + srv.quote(name)) })
				}
			}
			if len(kept) != 1 {
				t.Fatalf("new bare tables %q, want one", kept)
			}
			if got, err := srv.query("select count(*) from " + srv.quote(kept[0])); err != nil || got[0] != strconv.Itoa(n) {
				t.Errorf("bare table %s holds %v rows (%v), want %d (the last method's)", kept[0], got, err, n)
			}
			if tc.layout != "" {
				// Mapped: the bare table has the pipeline's columns.
				cols := "select column_name from information_schema.columns where table_name = '%s' order by ordinal_position"
				if tc.dialect == "mysql" {
					cols = "select column_name from information_schema.columns where table_schema = database() and table_name = '%s' order by ordinal_position"
				}
				want, _ := srv.query(fmt.Sprintf(cols, table))
				got, _ := srv.query(fmt.Sprintf(cols, kept[0]))
				if !slices.Equal(got, want) || len(want) == 0 {
					t.Errorf("bare columns %q, pipeline columns %q", got, want)
				}
			}

			// Without --keep the bare table is gone after the run.
			runBenchJSON(t, "--config", cfg, "--server", "embedded", "--messages", "100", "--batch-size", "100", "--sink", tc.dialect)
			again, _ := srv.query(srv.tables)
			if len(again) != len(after) {
				t.Errorf("bare tables after a run without --keep: %q, before it %q", again, after)
			}
		})
	}
}

// TestBenchRatios: a phase's ratio is the median over the rounds of its
// rate to the same round's fastest (or, for a fan-out, slowest) compared
// phase, and the text table prints it below the phases.
func TestBenchRatios(t *testing.T) {
	round := func(pipe, bareA, bareB, fan float64) []benchRow {
		return []benchRow{
			{"consume+ack ceiling", 100, 0.5},
			{"x (bare, a)", 100, 100 / bareA},
			{"x (bare, b)", 100, 100 / bareB},
			{"pipeline (x)", 100, 100 / pipe},
			{"pipeline (f)", 100, 100 / fan},
		}
	}
	versus := map[string]benchVersus{
		"pipeline (x)": {Names: []string{"x (bare, a)", "x (bare, b)"}},
		"pipeline (f)": {Names: []string{"x (bare, a)", "x (bare, b)"}, Slowest: true},
	}
	rounds := [][]benchRow{round(50, 100, 40, 20), round(60, 50, 80, 30), round(10, 100, 100, 10)}
	got := summariseVersus(rounds, versus)
	// pipeline (x): 50/100, 60/80, 10/100 → median 0.5; pipeline (f):
	// 20/40, 30/50, 10/100 → median 0.5.
	for _, p := range got[3:] {
		if math.Abs(p.Ratio-0.5) > 1e-9 || len(p.Ratios) != 3 {
			t.Errorf("%s: ratio %v (rounds %v), want median 0.5 of 3", p.Phase, p.Ratio, p.Ratios)
		}
	}
	if want := []float64{0.5, 0.75, 0.1}; !slices.EqualFunc(got[3].Ratios, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("pipeline (x) rounds %v, want %v (to the fastest bare phase)", got[3].Ratios, want)
	}
	if want := []float64{0.5, 0.6, 0.1}; !slices.EqualFunc(got[4].Ratios, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Errorf("pipeline (f) rounds %v, want %v (to the slowest)", got[4].Ratios, want)
	}
	if !math.IsNaN(got[1].Ratio) {
		t.Errorf("a phase without comparison has ratio %v", got[1].Ratio)
	}
	var b bytes.Buffer
	printBench(&b, "text", "title", rounds, versus, nil)
	for _, want := range []string{
		"0.50× pipeline (x) vs fastest of x (bare, a), x (bare, b) (rounds 0.50 0.75 0.10)",
		"0.50× pipeline (f) vs slowest of x (bare, a), x (bare, b) (rounds 0.50 0.60 0.10)",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestBenchBareMethods: --bare-sql accepts best, all, off and method
// lists, and each dialect runs only the methods it has.
func TestBenchBareMethods(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want []string
		err  bool
	}{
		{"best", []string{"best"}, false},
		{"all", []string{"all"}, false},
		{"off", []string{"off"}, false},
		{"copy, values100", []string{"copy", "values100"}, false},
		{"bulk", nil, true},
		{"values,", nil, true},
	} {
		got, err := bareMethods(tt.spec)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("bareMethods(%q) = %q, %v; want %q, error %t", tt.spec, got, err, tt.want, tt.err)
		}
	}
	audit := &bareDB{d: sqlmodel.SQLite, table: &sqlmodel.Table{}}
	if audit.supports("copy") || audit.supports("unnest") || !audit.supports("values100") {
		t.Error("SQLite supports copy or unnest, or not values100")
	}
	pgMapped := &bareDB{d: sqlmodel.Postgres, table: &sqlmodel.Table{Mapped: &sqlmodel.Mapped{}}}
	if pgMapped.supports("unnest") || !pgMapped.supports("copy") {
		t.Error("PostgreSQL mapped: unnest supported or copy not")
	}
	for d, m := range bestBare {
		if !slices.Contains(bareMethodsOf[d], m) {
			t.Errorf("best method %q of %s is not one of its methods", m, d)
		}
	}
}
