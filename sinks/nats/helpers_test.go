package natssink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/tracing"
)

// fixedNow is the stored_at of every test sink (docs/formats.md#file-records).
var fixedNow = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// server starts a JetStream server holding stream name on subjects and
// returns it with a client connection (closed when the test ends).
func serverWithStream(t *testing.T, name string, subjects ...string) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: name, Subjects: subjects})
	return s, nc, js
}

// literal returns the default configuration republishing to subject.
func literal(subject string) Config {
	c := Default()
	c.Subject = &subject
	return c
}

// prefixed returns the default configuration republishing under prefix.
func prefixed(prefix string) Config {
	c := Default()
	c.SubjectPrefix = &prefix
	return c
}

// deps is what the pipeline gives the sink: the source connection nc
// (nil: none) and tracing.
func deps(nc *nats.Conn) sink.Deps {
	return sink.Deps{Source: sink.Source{Conn: source(nc)}, Tracer: tracing.ForSinks()}
}

// source returns nc as sink.Source's connection hook; nil means none.
func source(nc *nats.Conn) func() (any, error) {
	if nc == nil {
		return nil
	}
	return func() (any, error) { return nc, nil }
}

// open starts a sink for c over the source connection nc with a fixed
// clock and stops it when the test ends.
func open(t *testing.T, nc *nats.Conn, c Config) *Sink {
	t.Helper()
	s, err := New(t.Context(), c, deps(nc))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.now = func() time.Time { return fixedNow }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// env builds an envelope the way the runner does, from stream and seq
// (0 = no JetStream metadata), headers and body.
func env(subject, stream string, seq uint64, header map[string][]string, body string) *sink.Envelope {
	var reply string
	if seq != 0 {
		reply = fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	}
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(body), Header: header}, nil, fixedNow)
}

// batch returns n envelopes of stream with sequences from..from+n-1.
func batch(subject, stream string, from, n uint64) []*sink.Envelope {
	var b []*sink.Envelope
	for seq := from; seq < from+n; seq++ {
		b = append(b, env(subject, stream, seq, nil, fmt.Sprintf(`{"seq":%d}`, seq)))
	}
	return b
}

// stored returns every message of stream, in sequence order.
func stored(t *testing.T, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream %s seq %d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}

// outcomes returns the outcome of each result.
func outcomes(rs []sink.Result) []sink.Outcome {
	out := make([]sink.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

func repeat(o sink.Outcome, n int) []sink.Outcome {
	out := make([]sink.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}
