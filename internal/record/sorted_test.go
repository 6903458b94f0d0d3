package record

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestBuiltObjectsAreSorted checks that every object this package builds is
// already in canonical key order. The encoder would sort an unsorted one
// anyway, so output stays right; this catches the slow path, e.g. a key
// added out of order, and a map[string]any creeping back in.
func TestBuiltObjectsAreSorted(t *testing.T) {
	full := shapestest.Golden()
	full.Headers["Nats-Expected-Stream"] = "S"
	full.Headers["nats-custom"] = "c"
	full.Headers["accept-encoding"] = "gzip"
	full.Reply, full.Domain = "r", "hub"
	bare := &sink.Envelope{Subject: "s", Pending: -1}
	headersOnly := intake.Build(intake.Message{Subject: "audit.login", Header: map[string][]string{"Nats-Msg-Size": {"2048"}}},
		nil, shapestest.Received)
	for name, e := range map[string]*sink.Envelope{"full": full, "bare": bare, "headers-only": headersOnly} {
		for _, mode := range []PayloadMode{JSONOrEnvelope, TextEnvelope, BytesEnvelope} {
			p, err := NormalisePayload(e, mode)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range []struct {
				what string
				v    any
			}{
				{"FileRecord with metadata", FileRecord(e, p, true, shapestest.Stored)},
				{"FileRecord without metadata", FileRecord(e, p, false, shapestest.Stored)},
				{"Metadata with custody", Metadata(e, shapestest.Stored, true)},
			} {
				if path := slowObject(doc.v, "(root)"); path != "" {
					t.Errorf("%s of %s envelope, %s payload: %s", doc.what, name, mode, path)
				}
			}
		}
	}
}

// slowObject returns a description of the first object in v the encoder
// would have to sort, or "".
func slowObject(v any, path string) string {
	switch x := v.(type) {
	case jsonx.Object:
		if !x.Sorted() {
			return path + " is not in key order"
		}
		for _, m := range x {
			if p := slowObject(m.Value, path+"."+m.Key); p != "" {
				return p
			}
		}
	case map[string]any:
		return path + " is a map[string]any"
	case []any:
		for i, item := range x {
			if p := slowObject(item, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestReservedMatchesGet compares reserved with the rule it implements in
// one pass, written the slow, obvious way: sink.Headers.Get for each
// reserved name, then every other "nats-" header under its own spelling.
func TestReservedMatchesGet(t *testing.T) {
	names := []string{"Nats-Msg-Id", "nats-msg-id", "NATS-MSG-ID", "Nats-Rollup", "nats-rollup", "traceparent",
		"TraceParent", "Accept-Encoding", "ACCEPT-ENCODING", "Nats-Time-Stamp", "nats-x", "Nats-X", "NATS-", "Nats",
		"X-Other", "Nats-Schedule-Time-Zone", "nats-schedule-time-zone"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		h := sink.Headers{}
		for _, n := range names {
			if rng.IntN(3) == 0 {
				h[n] = "v-" + n
			}
		}
		want := map[string]any{}
		for _, r := range reservedHeaders {
			if v, ok := h.Get(r); ok {
				want[r] = v
			}
		}
		for n, v := range h {
			if _, dup := want[n]; !dup && len(n) >= 5 && strings.EqualFold(n[:5], "nats-") {
				want[n] = v
			}
		}
		present := make([]string, 0, len(want))
		for n := range want {
			present = append(present, n)
		}
		slices.Sort(present)
		got := asMap(reserved(h))
		if diff := cmp.Diff(map[string]any{"reserved_headers": want, "reserved_headers_present": present}, got); diff != "" {
			t.Fatalf("reserved(%v) mismatch (-want +got):\n%s", h, diff)
		}
	}
}
