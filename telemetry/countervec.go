package telemetry

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// A CounterVec is a family of counters told apart by label values, for
// the few sink metrics that carry a label from a small fixed set (the HTTP
// sink's response class). Core metrics carry no labels. Nil-safe: a nil
// *CounterVec hands out nil (no-op) counters.
type CounterVec struct {
	name    string
	labels  []string
	prom    *prometheus.CounterVec
	changed *atomic.Uint64

	mu       sync.Mutex
	children map[string]*Counter // by snapshotKey
}

// With returns the counter of one combination of label values, in the
// order of the labels. The wrong number of values returns nil, a counter
// that does nothing: a metrics bug must not take delivery down with it.
func (v *CounterVec) With(values ...string) *Counter {
	if v == nil || len(values) != len(v.labels) {
		return nil
	}
	key := v.snapshotKey(values)
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[key]; ok {
		return c
	}
	c := &Counter{prom: v.prom.WithLabelValues(values...), changed: v.changed}
	v.children[key] = c
	return c
}

// snapshotKey names one series in the snapshot file, which has no place
// for labels: the Prometheus text form, name{label="value",…}.
func (v *CounterVec) snapshotKey(values []string) string {
	var b strings.Builder
	b.WriteString(v.name)
	b.WriteByte('{')
	for i, l := range v.labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(values[i]))
	}
	b.WriteByte('}')
	return b.String()
}

// values returns every series created so far by snapshot key.
func (v *CounterVec) values() map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]uint64, len(v.children))
	for k, c := range v.children {
		out[k] = c.Value()
	}
	return out
}

// NewCounterVec creates a sink-specific labelled counter family under the
// same namespace and registerer; see NewCounter. Each series appears in
// the snapshot once it has been used, keyed name{label="value"}. Asking
// again with the same name and labels returns the existing family; other
// labels, or a name taken by any other metric, are an error.
func (m *Metrics) NewCounterVec(name, help string, labels []string) (*CounterVec, error) {
	if m == nil {
		return nil, nil
	}
	if len(labels) == 0 {
		return nil, fmt.Errorf("metric %q: a counter family needs at least one label", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.extras.counterVecs {
		if e.name == name {
			if !slices.Equal(e.m.labels, labels) {
				return nil, fmt.Errorf("metric %q already exists with labels %v", name, e.m.labels)
			}
			return e.m, nil
		}
	}
	if err := m.checkFree(name); err != nil {
		return nil, err
	}
	v := &CounterVec{
		name:     name,
		labels:   slices.Clone(labels),
		prom:     prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: m.namespace, Name: name, Help: help}, labels),
		changed:  &m.changes,
		children: map[string]*Counter{},
	}
	if err := register(m.reg, v.prom); err != nil {
		return nil, err
	}
	m.extras.counterVecs = append(m.extras.counterVecs, named[*CounterVec]{name, v})
	return v, nil
}
