package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestOperatorLeastPrivilege runs dlq list/show/redrive, replay and status
// as a NATS user holding exactly the block docs/nats-permissions.md gives
// for the command, checks that the command succeeds without a permissions
// violation, then takes one permission away and checks the documented
// failure.
func TestOperatorLeastPrivilege(t *testing.T) {
	const n = 20
	// setup creates the streams, n messages on orders.new (seq 1..n), the
	// run consumer with everything acknowledged up to seq 10, and three
	// DLQ entries for messages 3, 4 and 5.
	setup := func(t *testing.T, block string) (*server.Server, jetstream.JetStream) {
		t.Helper()
		s := permissionServer(t, block)
		_, js := natstest.Connect(t, s, nats.UserInfo("admin", "admin"))
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}, Duplicates: time.Minute})
		natstest.PublishN(t, js, "orders.new", n, func(i int) []byte { return fmt.Appendf(nil, `{"n":%d}`, i+1) })
		ctx := context.Background()
		c, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "orders-sink", FilterSubject: "orders.>",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for seq := 3; seq <= 5; seq++ {
			e := intake.Build(intake.Message{Subject: "orders.new", Data: fmt.Appendf(nil, `{"n":%d}`, seq),
				Reply: fmt.Sprintf("$JS.ACK.ORDERS.orders-sink.1.%d.%d.1780048800000000000.0", seq, seq)}, nil, time.Now())
			m := dlq.Build(e, dlq.Failure{ErrorType: sink.PermanentSinkError, Error: "rejected"},
				dlq.Options{IncludePayload: true, IncludeHeaders: true, IncludeError: true, Consumer: "orders-sink"}, time.Now())
			natstest.Publish(t, js, "dlq.orders", m.Body, nats.Header(m.Header))
		}
		return s, js
	}
	config := func(t *testing.T, s *server.Server) string {
		return leastPrivilegeConfig(t, s.ClientURL(), "bind_only", true, fmt.Sprintf(`{"type": "file", "directory": %q}`, t.TempDir()))
	}
	run := func(t *testing.T, want int, args ...string) result {
		t.Helper()
		r := runNatsSink(t, cmdEnv(), args...)
		if r.code != want {
			t.Fatalf("nats-sink %s: exit %d, want %d\n%v", strings.Join(args, " "), r.code, want, r)
		}
		return r
	}
	noViolations := func(t *testing.T, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, "Permissions Violation") || strings.Contains(r.stdout+r.stderr, "the server refused") {
			t.Errorf("the documented permissions were not enough:\n%v", r)
		}
	}
	contains := func(t *testing.T, r result, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(r.stdout+r.stderr, w) {
				t.Errorf("output lacks %q\n%v", w, r)
			}
		}
	}
	msgs := func(t *testing.T, js jetstream.JetStream, stream, subject string) uint64 {
		t.Helper()
		got, _ := streamState(t, js, stream, subject)
		return got
	}

	t.Run("dlq-read", func(t *testing.T) {
		s, _ := setup(t, permissionBlock(t, "dlq-read"))
		cfg := config(t, s)
		noViolations(t, run(t, 0, "dlq", "list", cfg))
		r := run(t, 0, "dlq", "show", cfg, "2", "--payload")
		noViolations(t, r)
		contains(t, r, `"stream_sequence": 4`)
	})
	t.Run("dlq-read without MSG.GET", func(t *testing.T) {
		s, _ := setup(t, without(t, permissionBlock(t, "dlq-read"), "$JS.API.STREAM.MSG.GET.DLQ"))
		r := run(t, 1, "dlq", "list", config(t, s))
		contains(t, r, `DLQ failed: the server refused $JS.API.STREAM.MSG.GET.DLQ: nats: permissions violation: Permissions Violation for Publish to "$JS.API.STREAM.MSG.GET.DLQ"`)
	})
	t.Run("dlq-redrive", func(t *testing.T) {
		s, js := setup(t, permissionBlock(t, "dlq-redrive"))
		r := run(t, 0, "dlq", "redrive", config(t, s), "--all", "--purge")
		noViolations(t, r)
		contains(t, r, "Redrive complete: selected=3 redriven=3 duplicate=0 blocked=0 refused=0 failed=0 purged=3\n")
		if got := msgs(t, js, "ORDERS", "orders.new"); got != n+3 {
			t.Errorf("orders.new holds %d messages, want %d", got, n+3)
		}
		if got := msgs(t, js, "DLQ", "dlq.orders"); got != 0 {
			t.Errorf("DLQ holds %d entries after --purge, want 0", got)
		}
	})
	t.Run("dlq-redrive without the target subject", func(t *testing.T) {
		s, js := setup(t, without(t, permissionBlock(t, "dlq-redrive"), "orders.>"))
		r := run(t, 1, "dlq", "redrive", config(t, s), "1", "--purge")
		contains(t, r, `failed 1 orders.new: the server refused orders.new: nats: permissions violation: Permissions Violation for Publish to "orders.new"`,
			"Redrive incomplete: selected=1 redriven=0 duplicate=0 blocked=0 refused=0 failed=1 purged=0\n")
		if got := msgs(t, js, "ORDERS", "orders.new"); got != n {
			t.Errorf("orders.new holds %d messages, want %d", got, n)
		}
		if got := msgs(t, js, "DLQ", "dlq.orders"); got != 3 {
			t.Errorf("DLQ holds %d entries, want 3: nothing may be deleted", got)
		}
	})
	t.Run("dlq-redrive --purge without MSG.DELETE", func(t *testing.T) {
		s, js := setup(t, without(t, permissionBlock(t, "dlq-redrive"), "$JS.API.STREAM.MSG.DELETE.DLQ"))
		r := run(t, 1, "dlq", "redrive", config(t, s), "1", "--purge")
		contains(t, r, `purge-failed 1 orders.new seq=21: the server refused $JS.API.STREAM.MSG.DELETE.DLQ: `,
			"Redrive incomplete: selected=1 redriven=1 duplicate=0 blocked=0 refused=0 failed=0 purged=0\n")
		if got := msgs(t, js, "DLQ", "dlq.orders"); got != 3 {
			t.Errorf("DLQ holds %d entries, want 3", got)
		}
	})
	t.Run("replay", func(t *testing.T) {
		s, js := setup(t, permissionBlock(t, "replay"))
		r := run(t, 0, "replay", config(t, s), "--from-time", "1h", "--to-time", "2999-01-01T00:00:00Z", "--no-progress")
		noViolations(t, r)
		contains(t, r, fmt.Sprintf("Stream replay complete: stream=ORDERS first_seq=1 end_seq=%d messages=%d written=%d ", n, n, n))
		if _, consumers := streamState(t, js, "ORDERS", "orders.>"); consumers != 1 {
			t.Errorf("%d consumers, want 1 (orders-sink): the replay consumer must be gone", consumers)
		}
	})
	t.Run("replay-named", func(t *testing.T) {
		s, js := setup(t, permissionBlock(t, "replay-named"))
		r := run(t, 0, "replay", config(t, s), "--from-seq", "5", "--consumer", "backfill", "--delete-consumer", "--no-progress")
		noViolations(t, r)
		contains(t, r, fmt.Sprintf("Stream replay complete: stream=ORDERS first_seq=5 end_seq=%d messages=%d ", n, n-4))
		if _, consumers := streamState(t, js, "ORDERS", "orders.>"); consumers != 1 {
			t.Errorf("%d consumers, want 1 (orders-sink)", consumers)
		}
	})
	t.Run("replay without MSG.NEXT", func(t *testing.T) {
		s, js := setup(t, without(t, permissionBlock(t, "replay"), "$JS.API.CONSUMER.MSG.NEXT.ORDERS.*"))
		r := run(t, 1, "replay", config(t, s), "--from-seq", "1", "--no-progress")
		contains(t, r, `Stream replay failed: nats: permissions violation: Permissions Violation for Publish to "$JS.API.CONSUMER.MSG.NEXT.ORDERS.nats-sink-replay-`,
			"Stream replay incomplete: ")
		if _, consumers := streamState(t, js, "ORDERS", "orders.>"); consumers != 1 {
			t.Errorf("%d consumers, want 1: the replay consumer must be deleted", consumers)
		}
	})
	t.Run("status", func(t *testing.T) {
		s, _ := setup(t, permissionBlock(t, "status"))
		r := run(t, 0, "status", config(t, s))
		noViolations(t, r)
		contains(t, r, "pending 10 · ack pending 0", "10 messages · ", "dlq.orders on DLQ: 3 entries", "status: healthy\n")
	})
	t.Run("status without CONSUMER.INFO", func(t *testing.T) {
		s, _ := setup(t, without(t, permissionBlock(t, "status"), "$JS.API.CONSUMER.INFO.ORDERS.orders-sink"))
		r := run(t, 1, "status", config(t, s))
		contains(t, r, "the server refused $JS.API.CONSUMER.INFO.ORDERS.orders-sink: ", "status: unhealthy (consumer)\n")
	})
	t.Run("status without MSG.GET and STREAM.INFO.DLQ", func(t *testing.T) {
		block := without(t, permissionBlock(t, "status"), "$JS.API.STREAM.MSG.GET.ORDERS")
		s, _ := setup(t, without(t, block, "$JS.API.STREAM.INFO.DLQ"))
		r := run(t, 0, "status", config(t, s))
		contains(t, r, "10 messages · age unknown", "the server refused $JS.API.STREAM.INFO.DLQ", "status: healthy\n")
	})
}
