// Package routing selects, per message, the named sinks a message goes to
// and writes it to all of them behind one acknowledgement gate (the fanout
// sink type, docs/routing.md). The policy is plain data that package config
// builds and validates; Select is a pure function of the envelope, never of
// its payload.
package routing

import (
	"slices"

	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/sink"
)

// Match modes and no-match actions.
const (
	ModeFirst = "first"
	ModeAll   = "all"

	NoMatchReject  = "reject"
	NoMatchIgnore  = "ignore"
	NoMatchDefault = "default_route"
)

// Route actions reported by Select (the nats_sink.route_action span
// attribute).
const (
	ActionMatched = "matched"
	ActionDefault = "default_route"
	ActionIgnore  = "ignore"
	ActionReject  = "reject"
)

// ErrNoRoute is the text of the permanent failure of a message that no route
// matched under no_match "reject".
const ErrNoRoute = "fan-out routing selected no child sink target"

// Policy is the routing section: an ordered list of routes and what to do
// when none matches.
type Policy struct {
	Mode           string // ModeFirst or ModeAll
	NoMatch        string // NoMatchReject, NoMatchIgnore or NoMatchDefault
	Routes         []Route
	DefaultTargets []Target
}

// Route is one named route: all conditions of Match must hold.
type Route struct {
	Name    string
	Match   Match
	Targets []Target
}

// Match holds a route's conditions; an empty list or nil Subject sets no
// condition. Values are normalised by the loader.
type Match struct {
	Subject        *string
	Priority       []string
	Classification []string
	LabelsAll      []string
	LabelsAny      []string
	LabelsNone     []string
	Headers        []HeaderMatch
}

// HeaderMatch requires header Name (looked up ignoring case) to have one of
// Values exactly.
type HeaderMatch struct {
	Name   string
	Values []string
}

// Target names a named sink with its role. A required target decides the
// acknowledgement; an optional one gets a bounded wait window. The window
// values are nil while unset (routing disabled, no default targets).
type Target struct {
	Sink          string
	Required      bool
	MinimumWaitMS *int
	TimeoutMS     *int
}

// Wait returns the target's window in milliseconds, 0 for unset values.
func (t Target) Wait() (minimumWaitMS, timeoutMS int) {
	if t.MinimumWaitMS != nil {
		minimumWaitMS = *t.MinimumWaitMS
	}
	if t.TimeoutMS != nil {
		timeoutMS = *t.TimeoutMS
	}
	return minimumWaitMS, timeoutMS
}

// Matches reports whether every condition of m holds for e.
func (m *Match) Matches(e *sink.Envelope) bool {
	if m.Subject != nil && !subject.Match(*m.Subject, e.Subject) {
		return false
	}
	if len(m.Priority) > 0 && (e.Priority == "" || !slices.Contains(m.Priority, e.Priority)) {
		return false
	}
	if len(m.Classification) > 0 && (e.Classification == "" || !slices.Contains(m.Classification, e.Classification)) {
		return false
	}
	for _, l := range m.LabelsAll {
		if !slices.Contains(e.Labels, l) {
			return false
		}
	}
	if len(m.LabelsAny) > 0 && !slices.ContainsFunc(m.LabelsAny, func(l string) bool { return slices.Contains(e.Labels, l) }) {
		return false
	}
	for _, l := range m.LabelsNone {
		if slices.Contains(e.Labels, l) {
			return false
		}
	}
	for _, h := range m.Headers {
		v, ok := e.Headers.Get(h.Name)
		if !ok || !slices.Contains(h.Values, v) {
			return false
		}
	}
	return true
}

// Selection is the outcome of routing one message.
type Selection struct {
	// Action is ActionMatched, ActionDefault, ActionIgnore or ActionReject.
	Action string
	// Routes names the matching routes, in configuration order.
	Routes []string
	// Targets are the selected targets in selection order, each name once.
	// A name selected through several routes is required when any of them
	// lists it as required; else its window takes the largest values.
	Targets []Target
}

// Select routes e. Under ModeFirst the first matching route's targets are
// selected; under ModeAll those of every matching route, in route order.
func (p *Policy) Select(e *sink.Envelope) Selection {
	var sel Selection
	for i := range p.Routes {
		r := &p.Routes[i]
		if !r.Match.Matches(e) {
			continue
		}
		sel.Routes = append(sel.Routes, r.Name)
		sel.Targets = merge(sel.Targets, r.Targets)
		if p.Mode != ModeAll {
			break
		}
	}
	if len(sel.Routes) > 0 {
		sel.Action = ActionMatched
		return sel
	}
	switch p.NoMatch {
	case NoMatchIgnore:
		sel.Action = ActionIgnore
	case NoMatchDefault:
		sel.Action = ActionDefault
		sel.Targets = merge(nil, p.DefaultTargets)
	default:
		sel.Action = ActionReject
	}
	return sel
}

// merge adds ts to sel: a new name keeps its position, a known one becomes
// required if either is, and optional windows take the larger values.
func merge(sel []Target, ts []Target) []Target {
	for _, t := range ts {
		i := slices.IndexFunc(sel, func(s Target) bool { return s.Sink == t.Sink })
		if i < 0 {
			sel = append(sel, t)
			continue
		}
		sel[i] = mergeTarget(sel[i], t)
	}
	return sel
}

func mergeTarget(a, b Target) Target {
	if a.Required || b.Required {
		return Target{Sink: a.Sink, Required: true}
	}
	return Target{Sink: a.Sink, MinimumWaitMS: maxPtr(a.MinimumWaitMS, b.MinimumWaitMS), TimeoutMS: maxPtr(a.TimeoutMS, b.TimeoutMS)}
}

func maxPtr(a, b *int) *int {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case *b > *a:
		return b
	}
	return a
}

// Used returns the names of the named sinks some route or the default
// targets use, ascending.
func (p *Policy) Used() []string {
	var names []string
	add := func(ts []Target) {
		for _, t := range ts {
			if !slices.Contains(names, t.Sink) {
				names = append(names, t.Sink)
			}
		}
	}
	for _, r := range p.Routes {
		add(r.Targets)
	}
	add(p.DefaultTargets)
	slices.Sort(names)
	return names
}

// RequiredSomewhere reports whether name is a required target of some route
// or of the default targets.
func (p *Policy) RequiredSomewhere(name string) bool {
	req := func(ts []Target) bool {
		return slices.ContainsFunc(ts, func(t Target) bool { return t.Sink == name && t.Required })
	}
	if req(p.DefaultTargets) {
		return true
	}
	return slices.ContainsFunc(p.Routes, func(r Route) bool { return req(r.Targets) })
}

// MaxOptionalTimeoutMS returns the largest timeout_ms of an optional target
// in any route or the default targets, 0 when there is none.
func (p *Policy) MaxOptionalTimeoutMS() int {
	m := 0
	add := func(ts []Target) {
		for _, t := range ts {
			if _, to := t.Wait(); !t.Required {
				m = max(m, to)
			}
		}
	}
	for _, r := range p.Routes {
		add(r.Targets)
	}
	add(p.DefaultTargets)
	return m
}
