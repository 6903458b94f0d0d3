package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, method, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestHandlerRoutes(t *testing.T) {
	ready := Readiness{NATS: CheckOK, Consumer: CheckOK, Sink: CheckOK}
	srv := httptest.NewServer(NewHandler(HandlerOptions{Ready: func() Readiness { return ready }}))
	defer srv.Close()

	const jsonType = "application/json"
	for _, tt := range []struct {
		method, path string
		wantCode     int
		wantBody     string
		wantType     string
		wantAllow    string
	}{
		{"GET", "/healthz", 200, `{"status":"ok"}` + "\n", jsonType, ""},
		{"HEAD", "/healthz", 200, "", jsonType, ""},
		{"GET", "/readyz", 200, `{"checks":{"consumer":"ok","nats":"ok","sink":"ok"},"status":"ready"}` + "\n", jsonType, ""},
		{"HEAD", "/readyz", 200, "", jsonType, ""},
		{"GET", "/metrics", 404, "metrics disabled\n", "text/plain; charset=utf-8", ""},
		{"HEAD", "/metrics", 404, "", "text/plain; charset=utf-8", ""},
		{"POST", "/healthz", 405, "method not allowed\n", "text/plain; charset=utf-8", "GET, HEAD"},
		{"PUT", "/readyz", 405, "method not allowed\n", "text/plain; charset=utf-8", "GET, HEAD"},
		{"DELETE", "/metrics", 405, "method not allowed\n", "text/plain; charset=utf-8", "GET, HEAD"},
		{"OPTIONS", "/healthz", 405, "method not allowed\n", "text/plain; charset=utf-8", "GET, HEAD"},
		{"GET", "/", 404, "404 page not found\n", "text/plain; charset=utf-8", ""},
		{"GET", "/healthz/", 404, "404 page not found\n", "text/plain; charset=utf-8", ""},
		{"GET", "/metricsx", 404, "404 page not found\n", "text/plain; charset=utf-8", ""},
		{"POST", "/other", 404, "404 page not found\n", "text/plain; charset=utf-8", ""},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, body := get(t, tt.method, srv.URL+tt.path, nil)
			if resp.StatusCode != tt.wantCode || body != tt.wantBody {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if got := resp.Header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ready    func() Readiness
		wantCode int
		wantBody string
	}{
		{"ready", func() Readiness { return Readiness{NATS: "ok", Consumer: "ok", Sink: "ok"} }, 200,
			`{"checks":{"consumer":"ok","nats":"ok","sink":"ok"},"status":"ready"}`},
		{"nats disconnected", func() Readiness { return Readiness{NATS: NATSDisconnected, Consumer: "ok", Sink: "ok"} }, 503,
			`{"checks":{"consumer":"ok","nats":"disconnected","sink":"ok"},"status":"not_ready"}`},
		{"consumer fetch failing", func() Readiness { return Readiness{NATS: "ok", Consumer: ConsumerFetchFailing, Sink: "ok"} }, 503,
			`{"checks":{"consumer":"fetch_failing","nats":"ok","sink":"ok"},"status":"not_ready"}`},
		{"sink unhealthy", func() Readiness { return Readiness{NATS: "ok", Consumer: "ok", Sink: SinkUnhealthy} }, 503,
			`{"checks":{"consumer":"ok","nats":"ok","sink":"unhealthy"},"status":"not_ready"}`},
		{"fanout targets reported, optional-only unhealthy target keeps the process ready", func() Readiness {
			return Readiness{NATS: "ok", Consumer: "ok", Sink: "ok", Targets: map[string]string{"db": CheckOK, "audit": SinkUnhealthy}}
		}, 200,
			`{"checks":{"consumer":"ok","nats":"ok","sink":"ok","target:audit":"unhealthy","target:db":"ok"},"status":"ready"}`},
		{"required target down: the process circuit makes the sink unhealthy", func() Readiness {
			return Readiness{NATS: "ok", Consumer: "ok", Sink: SinkUnhealthy, Targets: map[string]string{"db": SinkUnhealthy, "audit": ""}}
		}, 503,
			`{"checks":{"consumer":"ok","nats":"ok","sink":"unhealthy","target:audit":"not_started","target:db":"unhealthy"},"status":"not_ready"}`},
		{"zero value is the start-up state", func() Readiness { return Readiness{} }, 503,
			`{"checks":{"consumer":"not_bound","nats":"connecting","sink":"not_started"},"status":"not_ready"}`},
		{"nil Ready func", nil, 503,
			`{"checks":{"consumer":"not_bound","nats":"connecting","sink":"not_started"},"status":"not_ready"}`},
		{"draining while healthy", func() Readiness { return Readiness{NATS: "ok", Consumer: "ok", Sink: "ok", Draining: true} }, 503,
			`{"checks":{"consumer":"ok","nats":"ok","sink":"ok"},"status":"draining"}`},
		{"draining wins over not ready", func() Readiness { return Readiness{NATS: NATSDisconnected, Consumer: "ok", Sink: "ok", Draining: true} }, 503,
			`{"checks":{"consumer":"ok","nats":"disconnected","sink":"ok"},"status":"draining"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(HandlerOptions{Ready: tt.ready})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/readyz", nil))
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody+"\n" {
				t.Errorf("GET /readyz = %d %q, want %d %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody+"\n")
			}
		})
	}
}

func TestMetricsEndpoint(t *testing.T) {
	reg := NewRegistry()
	m := newTestMetrics(t, reg)
	m.MessagesAcked.Add(3)
	if err := RegisterBuildInfo(reg, "nats_sinks", "v1", "c1"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(HandlerOptions{Gatherer: reg}))
	defer srv.Close()

	resp, body := get(t, "GET", srv.URL+"/metrics", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	for _, want := range []string{
		"nats_sinks_messages_acked_total 3\n",
		"# TYPE nats_sinks_nats_fetch_seconds histogram",
		`nats_sinks_nats_fetch_seconds_bucket{le="0.0005"} 0`,
		`nats_sinks_build_info{commit="c1",go_version="go`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text exposition format", ct)
	}

	resp, body = get(t, "GET", srv.URL+"/metrics", http.Header{"Accept": {"application/openmetrics-text;version=1.0.0"}})
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("negotiated Content-Type = %q, want OpenMetrics", ct)
	}
	if !strings.HasSuffix(body, "# EOF\n") || !strings.Contains(body, "nats_sinks_messages_acked_total 3") {
		t.Errorf("OpenMetrics body lacks the counter or # EOF:\n%.300s", body)
	}
}

func TestListenAndShutdown(t *testing.T) {
	s, err := Listen("127.0.0.1:0", NewHandler(HandlerOptions{}))
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	url := "http://" + s.Addr().String()
	resp, body := get(t, "GET", url+"/healthz", nil)
	if resp.StatusCode != 200 || body != `{"status":"ok"}`+"\n" {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, body)
	}

	if s2, err := Listen(s.Addr().String(), NewHandler(HandlerOptions{})); err == nil {
		s2.Shutdown(context.Background())
		t.Error("Listen on a bound address: got nil error")
	} else if want := "listen tcp " + s.Addr().String() + ": bind: address already in use"; err.Error() != want {
		// cli prefixes the key; the address must appear once.
		t.Errorf("bind error = %q, want %q", err, want)
	}

	if err := s.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("GET after Shutdown succeeded, want connection refused")
	}
}
