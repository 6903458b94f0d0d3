package telemetry

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a fresh registry holding the Go runtime and process
// collectors (standard names, no namespace prefix; docs/observability.md#metrics).
// Use one per process, never prometheus.DefaultRegisterer: tests create many.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister( // cannot fail on an empty registry
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// RegisterBuildInfo registers <namespace>_build_info{version,commit,go_version},
// a gauge that is always 1, so dashboards can join on the running build.
func RegisterBuildInfo(reg prometheus.Registerer, namespace, version, commit string) error {
	if reg == nil {
		return nil
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "Build information of the running nats-sink; always 1.",
		ConstLabels: prometheus.Labels{
			"version":    version,
			"commit":     commit,
			"go_version": runtime.Version(),
		},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register build_info: %w", err)
	}
	return nil
}
