package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"sigs.k8s.io/yaml"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// promqlIdent finds identifiers in a PromQL expression once strings, label
// matchers, ranges, Grafana variables and label lists were removed.
var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlVars      = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	promqlGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlKeywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
	prometheusOwned = map[string]bool{"up": true} // made by Prometheus itself, not exported
)

// metricNames returns the metric names a PromQL expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	s := promqlStrings.ReplaceAllString(expr, " ")
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlVars.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, m := range promqlIdent.FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") || promqlKeywords[m] {
			continue // a function, or an operator
		}
		if prometheusOwned[m] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// dashboardExprs returns every PromQL expression of the Grafana dashboard,
// keyed by its panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("grafana/nats-sink.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	out := map[string][]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			// label_values(METRIC{…}, LABEL): the metric part.
			q := strings.TrimPrefix(v.Definition, "label_values(")
			if i := strings.LastIndex(q, ","); i > 0 {
				q = q[:i]
			}
			out["variable "+v.Name] = append(out["variable "+v.Name], q)
		}
	}
	return out
}

// alertExprs returns the expression of every alerting rule.
func alertExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	out := map[string][]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s: no severity label or summary", r.Alert)
			}
			out["alert "+r.Alert] = append(out["alert "+r.Alert], r.Expr)
		}
	}
	return out
}

// scrape runs the binary on doc (which must enable metrics on listen),
// waits until /readyz answers 200, and returns the names of the series
// /metrics exports.
func scrape(t *testing.T, doc, listen string, env ...string) map[string]bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", path)
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	base := "http://" + listen
	waitFor(t, 60*time.Second, "pipeline ready", func() error {
		select {
		case <-done:
			t.Fatalf("nats-sink exited: %v\nstderr:\n%s", cmd.ProcessState, stderr.String())
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d %s\nstderr:\n%s", resp.StatusCode, body, stderr.String())
		}
		return nil
	})
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		names[name] = true
	}
	return names
}

// TestDashboardAndAlertMetrics extracts every metric name from the Grafana
// dashboard's and the alerting rules' PromQL, and checks that the binary
// exports each one: it runs real pipelines on an embedded nats-server, one
// per sink the per-sink panels show, and scrapes their /metrics.
func TestDashboardAndAlertMetrics(t *testing.T) {
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "M", Subjects: []string{"m.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "COPY", Subjects: []string{"copy.>"}})
	natstest.Publish(t, js, "m.1", []byte(`{"n":1}`), nil)

	doc := func(consumer, listen, sinkJSON string) string {
		return fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "M", "consumer": %q, "subject": "m.>"},
  "delivery": {"batch_size": 10, "batch_timeout_ms": 200},
  "metrics": {"enabled": true, "listen": %q},
  "logging": {"level": "WARNING"},
  "sink": %s
}`, srv.ClientURL(), consumer, listen, sinkJSON)
	}
	listen := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }

	// The core metrics, from a file sink; then each sink's own.
	exported := map[string]bool{}
	add := func(m map[string]bool) {
		for k := range m {
			exported[k] = true
		}
	}
	l := listen()
	add(scrape(t, doc("file", l, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir())), l))
	l = listen()
	add(scrape(t, doc("sqlite", l, fmt.Sprintf(`{"type": "sqlite", "path": %q}`, filepath.Join(t.TempDir(), "e.db"))), l))

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer hook.Close()
	l = listen()
	add(scrape(t, doc("http", l, fmt.Sprintf(`{"type": "http", "url": %q, "allow_http_for_local_testing": true}`, hook.URL+"/in")), l))

	l = listen()
	add(scrape(t, doc("nats", l, `{"type": "nats", "subject_prefix": "copy", "expected_stream": "COPY"}`), l))

	backend := s3mem.New()
	if err := backend.CreateBucket("deploy-test"); err != nil {
		t.Fatal(err)
	}
	s3srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer s3srv.Close()
	l = listen()
	add(scrape(t, doc("s3", l, fmt.Sprintf(`{"type": "s3", "bucket": "deploy-test", "endpoint_url": %q,
  "allow_http_for_local_testing": true, "region_name": "us-east-1", "credential_mode": "environment",
  "aws_access_key_id_env": "S3_KEY_ID", "aws_secret_access_key_env": "S3_SECRET"}`, s3srv.URL)), l,
		"S3_KEY_ID=AKIDTEST", "S3_SECRET=secret"))

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers, _ := json.Marshal(kc.ListenAddrs())
	l = listen()
	add(scrape(t, doc("kafka", l, fmt.Sprintf(`{"type": "kafka", "brokers": %s, "topic": "events"}`, brokers)), l))

	// PostgreSQL needs the service (CI has it).
	if dsn := os.Getenv("NATS_SINKS_TEST_POSTGRES_DSN"); dsn != "" || os.Getenv("NATS_SINKS_REQUIRE_SERVICES") == "1" {
		dsn = natstest.Service(t, "NATS_SINKS_TEST_POSTGRES_DSN")
		cc, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		password := cc.Password
		if password == "" {
			password = "unused" // the test servers trust local connections
		}
		l = listen()
		add(scrape(t, doc("postgres", l, fmt.Sprintf(`{"type": "postgres", "host": %q, "port": %d, "database": %q,
  "user": %q, "password": %q, "sslmode": "disable", "table": "deploy_metrics_test", "auto_create": true}`,
			cc.Host, cc.Port, cc.Database, cc.User, password)), l))
	}

	exprs := dashboardExprs(t)
	for k, v := range alertExprs(t) {
		exprs[k] = v
	}
	titles := make([]string, 0, len(exprs))
	for k := range exprs {
		titles = append(titles, k)
	}
	sort.Strings(titles)
	checked := map[string]bool{}
	for _, title := range titles {
		for _, e := range exprs[title] {
			names := metricNames(t, e)
			if len(names) == 0 && !strings.HasPrefix(strings.TrimSpace(e), "up{") {
				t.Errorf("%s: no metric in %q", title, e)
			}
			for _, n := range names {
				if !strings.HasPrefix(n, "nats_sinks_") {
					t.Errorf("%s: %s is not a nats-sink metric (namespace nats_sinks)", title, n)
					continue
				}
				if !exported[n] {
					if strings.HasPrefix(n, "nats_sinks_postgres_") && os.Getenv("NATS_SINKS_TEST_POSTGRES_DSN") == "" {
						t.Logf("%s: %s not checked (no PostgreSQL: set NATS_SINKS_TEST_POSTGRES_DSN)", title, n)
						continue
					}
					t.Errorf("%s: %s is not exported by the binary", title, n)
				}
				checked[n] = true
			}
		}
	}
	if !t.Failed() {
		t.Logf("%d metric names in the queries of %d panels, variables and rules, all exported", len(checked), len(titles))
	}
}

// TestAlertRulesPromtool runs promtool check rules when Debian's prometheus
// package provides it (.ci/run installs it).
func TestAlertRulesPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool", "Debian package prometheus")
	out, err := exec.Command(promtool, "check", "rules", "prometheus/alerts.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestMetricNamesFromPromQL pins the extractor the dashboard test relies on.
func TestMetricNamesFromPromQL(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want string
	}{
		{`histogram_quantile(0.99, sum by (le) (rate(nats_sinks_x_bucket{job=~"$job", le!="+Inf"}[$__rate_interval])))`, "nats_sinks_x_bucket"},
		{`max by (job) (a) > 0 and sum without (instance) (rate(b[5m])) == 0 or up{job="x"} == 0`, "a b"},
		{`min by (job, instance) (nats_sinks_nats_connected) == 0`, "nats_sinks_nats_connected"},
	} {
		if got := strings.Join(metricNames(t, tt.expr), " "); got != tt.want {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}
