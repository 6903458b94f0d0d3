package routing

import "github.com/nats-sinks/nats-sink/sink"

// metrics are the fanout_* series (no labels, like every series of the
// host). Registration errors leave a working no-op: a metric never stops
// data from moving.
type metrics struct {
	routeMatches, routed, noRoute, selected sink.Counter
	reqSuccess, reqFailure                  sink.Counter
	optSuccess, optFailure, optTimeout      sink.Counter
	acked, ackBlocked                       sink.Counter
	current, unhealthy                      sink.Gauge
	gateSeconds, batchSeconds               sink.Histogram
}

func newMetrics(m sink.Metrics) *metrics {
	c := func(name, help string) sink.Counter { x, _ := m.Counter(name, help); return x }
	return &metrics{
		routeMatches: c("fanout_route_matches_total", "Matching routes, summed over messages."),
		routed:       c("fanout_messages_routed_total", "Messages with at least one target."),
		noRoute:      c("fanout_messages_no_route_total", "Messages without a route under no_match reject or ignore."),
		selected:     c("fanout_child_sinks_selected_total", "Selected targets, summed over messages."),
		reqSuccess:   c("fanout_required_child_success_total", "Required target operations that committed every message."),
		reqFailure:   c("fanout_required_child_failure_total", "Required target operations with a message not committed."),
		optSuccess:   c("fanout_optional_child_success_total", "Optional target operations that committed every message."),
		optFailure:   c("fanout_optional_child_failure_total", "Optional target operations with a message not committed."),
		optTimeout:   c("fanout_optional_child_timeout_total", "Optional target operations cancelled at their deadline."),
		acked:        c("fanout_messages_acked_total", "Routed messages the gate released for acknowledgement."),
		ackBlocked:   c("fanout_messages_ack_blocked_total", "Routed messages held back by a failed required target."),
		current: func() sink.Gauge {
			g, _ := m.Gauge("current_fanout_child_sinks_selected", "Targets of the latest evaluated message.")
			return g
		}(),
		unhealthy: func() sink.Gauge {
			g, _ := m.Gauge("fanout_targets_unhealthy", "Targets whose destination circuit is open.")
			return g
		}(),
		gateSeconds: func() sink.Histogram {
			h, _ := m.Histogram("fanout_ack_gate_wait_seconds", "From the start of a batch's target writes to the gate's release.", nil)
			return h
		}(),
		batchSeconds: func() sink.Histogram {
			h, _ := m.Histogram("fanout_batch_seconds", "From the start of route selection to the gate's release.", nil)
			return h
		}(),
	}
}

func (m *metrics) observeSelection(sel Selection) {
	m.routeMatches.Add(len(sel.Routes))
	m.selected.Add(len(sel.Targets))
	m.current.Set(float64(len(sel.Targets)))
	if len(sel.Targets) > 0 {
		m.routed.Add(1)
	}
	if sel.Action == ActionReject || sel.Action == ActionIgnore {
		m.noRoute.Add(1)
	}
}

func (m *metrics) observeOps(ops []*op) {
	for _, o := range ops {
		ok := true
		for _, r := range o.results {
			if !r.Outcome.Acked() {
				ok = false
				break
			}
		}
		switch {
		case o.required && ok:
			m.reqSuccess.Add(1)
		case o.required:
			m.reqFailure.Add(1)
		case o.timedOut.Load():
			m.optTimeout.Add(1)
		case ok:
			m.optSuccess.Add(1)
		default:
			m.optFailure.Add(1)
		}
	}
}

func (m *metrics) observeDecisions(sels []Selection, results []sink.Result) {
	for i, sel := range sels {
		if len(sel.Targets) == 0 {
			continue
		}
		if results[i].Outcome.Acked() {
			m.acked.Add(1)
		} else {
			m.ackBlocked.Add(1)
		}
	}
}
