package record

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/jsonx/jsonxtest"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

var corpusSeed = flag.Uint64("metadata.seed", 1, "seed of the generated envelope corpus of TestAppendMetadataCorpus")

var (
	flavours = []jsonx.Flavour{jsonx.UTF8, jsonx.ASCII}
	orders   = []jsonx.KeyOrder{jsonx.CanonicalOrder, jsonx.JSONBOrder}
)

// TestAppendMetadataGolden compares the streaming writer with the tree path
// on the envelopes of the golden and shape tests.
func TestAppendMetadataGolden(t *testing.T) {
	for name, e := range goldenEnvelopes() {
		for _, stored := range []time.Time{shapestest.Stored, shapestest.Stored.Add(999), time.Unix(0, 0)} {
			t.Run(name, func(t *testing.T) {
				if err := checkAppendMetadata(e, stored); err != nil {
					t.Errorf("stored at %v: %v\nenvelope: %#v", stored, err, e)
				}
			})
		}
	}
}

// TestAppendMetadataGoldenFile checks the streaming writer against the
// metadata member of the data-shapes §7.2 golden record directly.
func TestAppendMetadataGoldenFile(t *testing.T) {
	var record struct{ Metadata json.RawMessage }
	if err := json.Unmarshal(readGolden(t, "file_record_compact.json"), &record); err != nil {
		t.Fatal(err)
	}
	got := AppendMetadata(nil, shapestest.Golden(), shapestest.Stored, false, jsonx.UTF8, jsonx.CanonicalOrder)
	if !bytes.Equal(got, record.Metadata) {
		t.Errorf("AppendMetadata of the golden envelope differs from data-shapes §7.2 (-want +got):\n%s",
			cmp.Diff(string(record.Metadata), string(got)))
	}
}

// TestAppendMetadataCorpus compares the streaming writer with the tree path
// over generated envelopes that vary every input of the document. Run with
// -metadata.seed=N for another corpus; a failure prints its seed.
func TestAppendMetadataCorpus(t *testing.T) {
	seed := *corpusSeed
	rng := rand.New(rand.NewPCG(seed, 0x6d657461))
	for i := range 2000 {
		e, stored := randomEnvelope(rng)
		if err := checkAppendMetadata(e, stored); err != nil {
			t.Fatalf("seed %d, envelope %d, stored at %v: %v\nenvelope: %#v", seed, i, stored, err, e)
		}
	}
}

// checkAppendMetadata compares AppendMetadata and AppendHeaders with the
// tree path for both flavours, both custody settings and both key orders.
func checkAppendMetadata(e *sink.Envelope, stored time.Time) error {
	for _, f := range flavours {
		for _, custody := range []bool{false, true} {
			want := jsonx.Append(nil, Metadata(e, stored, custody), f)
			if err := checkOrders(want, func(o jsonx.KeyOrder) []byte {
				return AppendMetadata([]byte("prefix"), e, stored, custody, f, o)[len("prefix"):]
			}); err != nil {
				return fmt.Errorf("AppendMetadata(flavour %d, custody %v): %w", f, custody, err)
			}
		}
		want := jsonx.Append(nil, Headers(e), f)
		if err := checkOrders(want, func(o jsonx.KeyOrder) []byte { return AppendHeaders(nil, e, f, o) }); err != nil {
			return fmt.Errorf("AppendHeaders(flavour %d): %w", f, err)
		}
	}
	return nil
}

// checkOrders requires appendIn(CanonicalOrder) to be want, byte for byte,
// and appendIn(JSONBOrder) to be the same value with every object's keys in
// jsonb order.
func checkOrders(want []byte, appendIn func(jsonx.KeyOrder) []byte) error {
	if got := appendIn(jsonx.CanonicalOrder); !bytes.Equal(got, want) {
		return fmt.Errorf("canonical order differs from the tree (-tree +stream):\n%s", cmp.Diff(string(want), string(got)))
	}
	got := appendIn(jsonx.JSONBOrder)
	wv, err := jsonx.Parse(want)
	if err != nil {
		return fmt.Errorf("tree output does not parse: %v\n%s", err, want)
	}
	gv, err := jsonx.Parse(got)
	if err != nil {
		return fmt.Errorf("JSONB output does not parse: %v\n%s", err, got)
	}
	if !reflect.DeepEqual(wv, gv) { // cmp.Diff only to explain: it is slow
		return fmt.Errorf("JSONB output is another value (-tree +stream):\n%s", cmp.Diff(wv, gv))
	}
	if err := jsonxtest.JSONBOrdered(got); err != nil {
		return fmt.Errorf("JSONB output: %v\n%s", err, got)
	}
	return nil
}

// TestAppendMetadataAllocations checks the allocation budget: none into a
// buffer with room, for the golden envelope and in both orders.
func TestAppendMetadataAllocations(t *testing.T) {
	e := shapestest.Golden()
	e.Headers["nats-custom"] = "c"
	e.Headers["accept-encoding"] = "gzip"
	buf := make([]byte, 0, 8192)
	for _, o := range orders {
		if n := testing.AllocsPerRun(100, func() {
			AppendMetadata(buf[:0], e, shapestest.Stored, true, jsonx.ASCII, o)
		}); n != 0 {
			t.Errorf("AppendMetadata(order %d) allocates %v times per call, want 0", o, n)
		}
		if n := testing.AllocsPerRun(100, func() { AppendHeaders(buf[:0], e, jsonx.ASCII, o) }); n != 0 {
			t.Errorf("AppendHeaders(order %d) allocates %v times per call, want 0", o, n)
		}
	}
}

func TestAppendMetadataInvalidOrderPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("AppendMetadata with KeyOrder 9 did not panic")
		}
	}()
	AppendMetadata(nil, shapestest.Golden(), shapestest.Stored, false, jsonx.ASCII, 9)
}

// FuzzAppendMetadata compares the two paths on envelopes that a few fuzzed
// bytes pick from the corpus variations.
func FuzzAppendMetadata(f *testing.F) {
	for _, seed := range []uint64{0, 1, 2, 42, 1 << 40} {
		f.Add(seed, seed*7)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		e, stored := randomEnvelope(rand.New(rand.NewPCG(a, b)))
		if err := checkAppendMetadata(e, stored); err != nil {
			t.Fatalf("%v\nenvelope: %#v", err, e)
		}
	})
}

// goldenEnvelopes returns the envelopes the golden and shape tests use.
func goldenEnvelopes() map[string]*sink.Envelope {
	full := shapestest.Golden()
	full.Headers["Nats-Expected-Stream"] = "S"
	full.Headers["nats-custom"] = "c"
	full.Headers["accept-encoding"] = "gzip"
	full.Reply, full.Domain = "r", "hub"
	received := time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)
	js := time.Unix(0, 1780048800123456789)
	timestamps := func(ts string, js time.Time) *sink.Envelope {
		return &sink.Envelope{Subject: "s", Headers: sink.Headers{"Nats-Time-Stamp": ts}, Timestamp: js, ReceivedAt: received, Pending: -1}
	}
	return map[string]*sink.Envelope{
		"golden":          shapestest.Golden(),
		"full":            full,
		"bare":            {Subject: "s", Pending: -1},
		"zero":            {},
		"batch message":   shapestest.Envelope("ORDERS", 7),
		"headers-only":    intake.Build(intake.Message{Subject: "audit.login", Header: map[string][]string{"Nats-Msg-Size": {"2048"}}}, nil, shapestest.Received),
		"skew":            timestamps("2026-05-29T12:00:01+02:00", js),
		"malformed":       timestamps("20260529T100000Z", js),
		"malformed no js": timestamps("yesterday", time.Time{}),
		"far-off header":  timestamps("9999-12-31", time.Time{}),
		"jetstream known": {Subject: "s", Stream: "S", Consumer: "C", Domain: "hub", StreamSequence: 5, ConsumerSequence: 9,
			Pending: 0, DeliveryCount: 2, Timestamp: time.Unix(0, 1780048800999999600)},
		"reserved": {Subject: "s", Pending: -1, Headers: sink.Headers{
			"nats-msg-id": "lower", "NATS-MSG-ID": "upper", "Nats-Msg-Size": "12", "TraceParent": "tp",
			"accept-encoding": "gzip", "Nats-Sinks-Labels": "a", "nats-custom": "c", "X-Other": "x", "Nats": "no dash",
			"Nats-Expected-Stream": "S"}},
	}
}

// Pools the corpus draws from. Header names include reserved names in
// several cases (so case variants compete), other nats- names, names that
// only look reserved, non-ASCII and invalid UTF-8 (allowed in an Envelope
// built by hand, though intake drops them; their U+FFFD spellings are
// distinct, so the output never has duplicate keys).
var (
	headerNames = []string{
		"Nats-Msg-Id", "nats-msg-id", "NATS-MSG-ID", "Nats-Rollup", "nats-rollup", "traceparent", "TraceParent",
		"Accept-Encoding", "ACCEPT-ENCODING", "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-TTL", "nats-ttl",
		"Nats-Schedule-Time-Zone", "Nats-Sinks-Priority", "Nats-Sinks-Labels", "Nats-Msg-Size", "nats-custom",
		"NATS-X", "Nats-", "Nats", "nats", "X-Other", "x-tenant", "Content-Type", "Nats-é", "Ünïcode",
		"nats-\xff", "x-bad\xc3", "a", "zz", strings.Repeat("n", 40),
	}
	headerValues = []string{
		"", "v", "O-1001", "café", "😀 emoji", "tab\there", "quote\"back\\slash", "\x00\x1f\x7f", "\u2028\u2029",
		"bad \xe2\x82 utf8", "\xff", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", strings.Repeat("x", 300),
	}
	timeStamps = []string{
		"2026-05-29T09:59:59.5Z", "2026-05-29", "2026-05-29 10:00:00+02:00", "2026-05-29t10:00:00.1234567-05:30",
		"20260529T100000Z", "yesterday", "", "2026-02-30", "9999-12-31T23:59:59.999999Z", "0001-01-01",
		"2262-04-11T23:47:16.854775Z", "2262-04-11T23:47:16.854776Z", "1677-09-21T00:12:43.145224Z",
	}
	strs = []string{"", "S", "ORDERS", "orders-file", "hub", "é-stream", "bad\xffname", "with \"quote\""}
)

// randomEnvelope returns an envelope and a store time drawn from the pools,
// each input varied independently.
func randomEnvelope(rng *rand.Rand) (*sink.Envelope, time.Time) {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var headers map[string]string
	switch rng.IntN(5) {
	case 0: // none
	case 1:
		headers = map[string]string{}
	case 2:
		headers = map[string]string{pick(headerNames): pick(headerValues)}
	default:
		headers = map[string]string{}
		for range rng.IntN(25) {
			headers[pick(headerNames)] = pick(headerValues)
		}
	}
	switch rng.IntN(4) {
	case 0:
		if headers == nil {
			headers = map[string]string{}
		}
		name := "Nats-Time-Stamp"
		if rng.IntN(3) == 0 {
			name = "nats-time-stamp"
		}
		headers[name] = pick(timeStamps)
	case 1:
		if headers != nil {
			headers["NATS-TIME-STAMP"] = pick(timeStamps)
		}
	}
	if headers != nil && rng.IntN(4) == 0 {
		// A valid or malformed Nats-Msg-Size with the matching presence.
		headers["Nats-Msg-Size"] = []string{"2048", "0", "-1", "x", " 12 "}[rng.IntN(5)]
	}

	subject := []string{"orders.created", "", "orders.café", "a\xffb", "t.\"x\"\n", "😀.>"}[rng.IntN(6)]
	if rng.IntN(4) == 0 {
		// Through intake: normalised headers, JetStream metadata from a
		// reply subject, presence from Nats-Msg-Size.
		h := make(map[string][]string, len(headers))
		for k, v := range headers {
			h[k] = []string{v}
		}
		reply := fmt.Sprintf("$JS.ACK.%s.c.%d.%d.%d.%d.%d", []string{"ORDERS", "S"}[rng.IntN(2)], rng.IntN(3),
			rng.Uint64N(1<<40), rng.Uint64N(100), 1780048800000000000+rng.Int64N(1e12), rng.IntN(5))
		if rng.IntN(3) == 0 {
			reply = "_INBOX.x"
		}
		var data []byte
		if rng.IntN(3) > 0 {
			data = []byte(`{"n":1}`)
		}
		return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: data, Header: h}, nil, randomTime(rng)), randomTime(rng)
	}

	e := &sink.Envelope{
		Subject:          subject,
		Headers:          headers,
		Stream:           pick(strs),
		Consumer:         pick(strs),
		Domain:           pick(strs),
		StreamSequence:   []uint64{0, 1, 42, math.MaxUint64}[rng.IntN(4)],
		ConsumerSequence: []uint64{0, 7, 1 << 63}[rng.IntN(3)],
		Pending:          []int64{-1, 0, 3, math.MaxInt64}[rng.IntN(4)],
		DeliveryCount:    []uint64{0, 1, 2, 9}[rng.IntN(4)],
		MessageID:        []string{"", "O-1001", "id é", "\xfe"}[rng.IntN(4)],
		Priority:         []string{"", "high", "низкий"}[rng.IntN(3)],
		Classification:   []string{"", "internal", "secret\x00"}[rng.IntN(3)],
		Reply:            []string{"", "$JS.ACK.S.c.1.1.1.0.0", "r"}[rng.IntN(3)],
		ReceivedAt:       randomTime(rng),
	}
	switch rng.IntN(3) {
	case 1:
		e.Labels = []string{}
	case 2:
		e.Labels = []string{"billing", "eu", "é", "with;semi"}[:1+rng.IntN(4)]
	}
	switch rng.IntN(3) {
	case 0:
		e.Timestamp = time.Unix(0, 1780048800000000000+rng.Int64N(1e12))
	case 1:
		// On and around microsecond boundaries, where rounding matters.
		e.Timestamp = time.Unix(0, 1780048800123456500+rng.Int64N(3)-1)
	}
	e.Data = [][]byte{nil, {}, []byte(`{"n":1}`), bytes.Repeat([]byte{0xff}, 300)}[rng.IntN(4)]
	e.Payload = intake.Presence(headers, len(e.Data))
	if rng.IntN(5) == 0 {
		// Inconsistent on purpose: the document reports fields as they are.
		// Each field drawn on its own.
		e.Payload = sink.PayloadPresence{Present: rng.IntN(2) == 0, Omitted: rng.IntN(2) == 0,
			OmittedReason: []string{"", "headers_only"}[rng.IntN(2)], OriginalSize: rng.Int64N(3) - 1,
			SizeHeader: pick(headerValues), HasSizeHeader: rng.IntN(2) == 0, SizeHeaderMalformed: rng.IntN(2) == 0}
	}
	return e, randomTime(rng)
}

// randomTime returns a receive or store time: usually near the golden one,
// sometimes zero, in another zone, or far enough off that its epoch ns does
// not fit int64 (the jsonx.Integer path).
func randomTime(rng *rand.Rand) time.Time {
	switch rng.IntN(8) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(2300, 1, 2, 3, 4, 5, 678901234, time.UTC)
	case 2:
		return shapestest.Received.In(time.FixedZone("X", -(5*3600 + 1800)))
	}
	return shapestest.Received.Add(time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute)
}

// TestAppendMetadataCustody: with a custody document (the SQL sinks'
// METADATA_JSON), the streaming writer matches the tree path in both
// flavours and key orders, and the ascii flavour escapes a non-ASCII key id.
func TestAppendMetadataCustody(t *testing.T) {
	e := shapestest.Golden()
	e.Custody = &sink.Custody{Algorithm: "sha256", KeyID: "politique-é", HashPayload: true, HashMetadata: true,
		PayloadHash: strings.Repeat("a", 64), MetadataHash: strings.Repeat("b", 64), RecordHash: strings.Repeat("c", 64)}
	if err := checkAppendMetadata(e, shapestest.Stored); err != nil {
		t.Fatal(err)
	}
	got := string(AppendMetadata(nil, e, shapestest.Stored, true, jsonx.ASCII, jsonx.CanonicalOrder))
	const want = `{"custody":{"algorithm":"sha256","hash_input_format":"canonical-json","hash_metadata":true,"hash_payload":true,"key_id":"politique-\u00e9","metadata_hash":"` +
		`bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","payload_hash":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",` +
		`"previous_record_hash":null,"privacy":"hashes_are_not_encryption","record_hash":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc","schema":"nats_sinks.custody.v1","schema_version":1},"freshness":`
	if !strings.HasPrefix(got, want) {
		t.Errorf("METADATA_JSON starts\n%s\nwant\n%s", got[:min(len(got), len(want))], want)
	}
}
