package redissink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

var fixedNow = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)

// server is the test's Redis: its address, an admin client, and a key
// prefix no other test or run uses. Every key under the prefix is deleted
// when the test ends.
type server struct {
	addr   string
	admin  *redis.Client
	prefix string
}

func redisServer(t testing.TB) *server {
	t.Helper()
	addr := natstest.Service(t, "NATS_SINKS_TEST_REDIS_ADDR")
	admin := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	if err := admin.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", addr, err)
	}
	var b [6]byte
	rand.Read(b[:])
	s := &server{addr: addr, admin: admin, prefix: "nstest:" + hex.EncodeToString(b[:]) + ":"}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := admin.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			admin.Del(ctx, iter.Val())
		}
		admin.Close()
	})
	return s
}

// config returns the default configuration writing under the server's
// prefix: streams <prefix><subject>, dedupe keys <prefix>dedupe:….
func (s *server) config() Config {
	c := Default()
	c.Address = s.addr
	c.StreamKey = s.prefix + "{subject}"
	c.DedupeKeyPrefix = s.prefix + "dedupe:"
	return c
}

// open starts a sink with a fixed clock and stops it when the test ends.
func open(t testing.TB, c Config, deps sink.Deps) *Sink {
	t.Helper()
	s, err := New(context.Background(), c, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.now = func() time.Time { return fixedNow }
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// entries returns every entry of the streams under the prefix (dedupe keys
// excluded), stream by stream.
func (s *server) entries(t testing.TB) map[string][]redis.XMessage {
	t.Helper()
	ctx := context.Background()
	out := map[string][]redis.XMessage{}
	iter := s.admin.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if typ, _ := s.admin.Type(ctx, key).Result(); typ != "stream" {
			continue
		}
		msgs, err := s.admin.XRange(ctx, key, "-", "+").Result()
		if err != nil {
			t.Fatalf("XRANGE %s: %v", key, err)
		}
		out[key] = msgs
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	return out
}

// stored returns the origin of every entry under the prefix.
func (s *server) stored(t testing.TB) []sinktest.Stored {
	t.Helper()
	var out []sinktest.Stored
	for _, msgs := range s.entries(t) {
		for _, m := range msgs {
			seq, _ := strconv.ParseUint(fmt.Sprint(m.Values["nats-sinks-stream-sequence"]), 10, 64)
			out = append(out, sinktest.Stored{Stream: fmt.Sprint(m.Values["nats-sinks-stream"]), Sequence: seq})
		}
	}
	return out
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

func batch(subject, stream string, from, n uint64) []*sink.Envelope {
	var b []*sink.Envelope
	for seq := from; seq < from+n; seq++ {
		b = append(b, env(subject, stream, seq, nil, fmt.Sprintf(`{"seq":%d}`, seq)))
	}
	return b
}

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

func ptr[T any](v T) *T { return &v }
