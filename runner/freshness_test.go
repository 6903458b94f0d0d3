package runner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestObserveFreshness(t *testing.T) {
	recv := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	stored := recv.Add(2 * time.Second)
	env := func(header string, js time.Time) *sink.Envelope {
		h := sink.Headers{}
		if header != "" {
			h["Nats-Time-Stamp"] = header
		}
		return &sink.Envelope{Headers: h, Timestamp: js, ReceivedAt: recv}
	}
	type counts struct {
		Malformed, Missing, Future, StaleRecv, StaleStore uint64
		Skews, AgeRecv, AgeStore                          float64 // observation counts
		LastAgeRecv, LastAgeStore, LastSkew               float64
	}
	for _, tt := range []struct {
		name string
		f    Freshness
		e    *sink.Envelope
		want counts
	}{
		{"header time", Freshness{}, env("2026-05-29T09:59:50Z", time.Time{}),
			counts{AgeRecv: 1, AgeStore: 1, LastAgeRecv: 10, LastAgeStore: 12}},
		{"malformed header falls back to JetStream time", Freshness{}, env("20260529T095950Z", recv.Add(-time.Second)),
			counts{Malformed: 1, AgeRecv: 1, AgeStore: 1, LastAgeRecv: 1, LastAgeStore: 3}},
		{"missing counts nothing else", Freshness{}, env("", time.Time{}), counts{Missing: 1}},
		{"malformed and missing", Freshness{}, env("yesterday", time.Time{}), counts{Malformed: 1, Missing: 1}},
		{"future beyond tolerance", Freshness{}, env("2026-05-29T10:00:10Z", time.Time{}),
			counts{Future: 1, Skews: 1, LastSkew: 10, AgeRecv: 1, AgeStore: 1}},
		{"skew within tolerance", Freshness{}, env("2026-05-29T10:00:01Z", time.Time{}),
			counts{Skews: 1, LastSkew: 1, AgeRecv: 1, AgeStore: 1, LastAgeStore: 1}},
		{"stale", Freshness{}, env("2026-05-29T09:55:00Z", time.Time{}),
			counts{StaleRecv: 1, StaleStore: 1, AgeRecv: 1, AgeStore: 1, LastAgeRecv: 300, LastAgeStore: 302}},
		{"stale only at store", Freshness{StaleAfter: new(301 * time.Second)}, env("2026-05-29T09:55:00Z", time.Time{}),
			counts{StaleStore: 1, AgeRecv: 1, AgeStore: 1, LastAgeRecv: 300, LastAgeStore: 302}},
		{"stale disabled", Freshness{StaleAfter: new(-time.Second)}, env("2026-05-29T09:55:00Z", time.Time{}),
			counts{AgeRecv: 1, AgeStore: 1, LastAgeRecv: 300, LastAgeStore: 302}},
		{"disabled", Freshness{Disabled: true}, env("yesterday", time.Time{}), counts{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newMetrics(t)
			observeFreshness(m, tt.f, []*sink.Envelope{tt.e}, stored)
			got := counts{
				Malformed: m.EventCreationMalformed.Value(), Missing: m.EventCreationMissing.Value(),
				Future: m.EventCreationFuture.Value(), StaleRecv: m.EventsStaleAtReceive.Value(),
				StaleStore: m.EventsStaleAtStore.Value(),
				Skews:      m.EventSourceClockSkewSeconds.Summary().Count, LastSkew: m.EventSourceClockSkewSeconds.Summary().Last,
				AgeRecv: m.EventAgeAtReceiveSeconds.Summary().Count, LastAgeRecv: m.EventAgeAtReceiveSeconds.Summary().Last,
				AgeStore: m.EventAgeAtStoreSeconds.Summary().Count, LastAgeStore: m.EventAgeAtStoreSeconds.Summary().Last,
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("freshness metrics mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
