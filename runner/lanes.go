package runner

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/sink"
)

// Defaults of delivery.priority_lanes (docs/configuration.md#delivery).
const (
	DefaultLaneName               = "default"
	DefaultMaxPriorityValueLength = 64
)

// PriorityLanes configures priority lanes (delivery.priority_lanes, runtime
// docs/delivery.md#fetching-and-in-flight-batches step 4). Every message of a batch gets a lane from its resolved
// priority, and the batch is handed to the sink in weighted round-robin
// order over the lanes, so that within one batch high-priority messages are
// written first without starving the others. Lanes reorder within a batch
// only; ACKs stay in delivery order. Zero values mean the docs/configuration.md
// defaults.
type PriorityLanes struct {
	// Lanes in configuration order, which is the round-robin order; empty
	// means one lane "default" of weight 1.
	Lanes []Lane
	// DefaultLane receives messages without a priority and, unless
	// RejectUnknown, those whose priority no lane lists; "" means "default".
	// It must name a lane.
	DefaultLane string
	// RejectUnknown makes a priority that no lane lists a permanent
	// ValidationError (unknown_priority_action "reject") instead of sending
	// the message to the default lane.
	RejectUnknown bool
	// MaxValueLength is max_priority_value_length in characters; 0 means 64.
	// A longer priority is a permanent ValidationError.
	MaxValueLength int
}

// Lane is one priority lane.
type Lane struct {
	// Name is the lane's name (lower-case, as validated by config).
	Name string
	// Priorities are the priority values of this lane, case-folded. A value
	// belongs to at most one lane.
	Priorities []string
	// Weight is how many messages the lane contributes per round-robin pass;
	// 0 means 1.
	Weight int
}

// laneTable is a compiled PriorityLanes.
type laneTable struct {
	names      []string
	weights    []int
	byPriority map[string]int
	def        int
	reject     bool
	maxLen     int
}

func (p *PriorityLanes) compile() (*laneTable, error) {
	lanes := p.Lanes
	if len(lanes) == 0 {
		lanes = []Lane{{Name: DefaultLaneName, Weight: 1}}
	}
	t := &laneTable{byPriority: map[string]int{}, def: -1, reject: p.RejectUnknown, maxLen: p.MaxValueLength}
	if t.maxLen <= 0 {
		t.maxLen = DefaultMaxPriorityValueLength
	}
	def := p.DefaultLane
	if def == "" {
		def = DefaultLaneName
	}
	for i, l := range lanes {
		if l.Name == def {
			t.def = i
		}
		t.names = append(t.names, l.Name)
		t.weights = append(t.weights, max(l.Weight, 1))
		for _, v := range l.Priorities {
			v = strings.ToLower(v)
			if o, dup := t.byPriority[v]; dup && o != i {
				return nil, fmt.Errorf("runner: priority lanes %q and %q both list one priority value", lanes[o].Name, l.Name)
			}
			t.byPriority[v] = i
		}
	}
	if t.def < 0 {
		return nil, fmt.Errorf("runner: PriorityLanes.DefaultLane %q does not name a lane", def)
	}
	return t, nil
}

// Reasons a message gets no lane (permanent ValidationError). The texts
// never contain the priority value: it came from a header.
var (
	errPriorityControl = errors.New("priority value contains control characters")
	errPriorityUnknown = errors.New("priority value is not assigned to any lane and unknown_priority_action is reject")
)

// laneAssignment is the result of step 4 for one batch.
type laneAssignment struct {
	order     []int         // indices of the messages to write, in lane order
	rejected  map[int]error // indices rejected before the write
	defaulted int           // null priorities sent to the default lane
	active    int           // lanes with at least one message
}

// assign gives each envelope a lane and returns the write order (docs/delivery.md#fetching-and-in-flight-batches
// step 4): passes over the lanes in configuration order take up to weight
// messages from each, in delivery order within a lane, until all are taken.
func (t *laneTable) assign(envs []*sink.Envelope) laneAssignment {
	a := laneAssignment{rejected: map[int]error{}}
	queues := make([][]int, len(t.names))
	for i, e := range envs {
		lane := t.def
		switch v := e.Priority; {
		case v == "":
			a.defaulted++
		case utf8.RuneCountInString(v) > t.maxLen:
			a.rejected[i] = fmt.Errorf("priority value is longer than max_priority_value_length (%d characters)", t.maxLen)
			continue
		case strings.IndexFunc(v, unicode.IsControl) >= 0:
			a.rejected[i] = errPriorityControl
			continue
		default:
			if l, ok := t.byPriority[strings.ToLower(v)]; ok {
				lane = l
			} else if t.reject {
				a.rejected[i] = errPriorityUnknown
				continue
			}
		}
		queues[lane] = append(queues[lane], i)
	}
	total := len(envs) - len(a.rejected)
	for _, q := range queues {
		if len(q) > 0 {
			a.active++
		}
	}
	a.order = make([]int, 0, total)
	for len(a.order) < total {
		for l, q := range queues {
			take := min(t.weights[l], len(q))
			a.order = append(a.order, q[:take]...)
			queues[l] = q[take:]
		}
	}
	return a
}
