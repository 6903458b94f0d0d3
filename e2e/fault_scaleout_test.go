package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestFaultScaleOutKill runs two, then three `nats-sink run` processes on
// one durable consumer writing into one PostgreSQL table (docs/delivery.md#scale-out), and
// SIGKILLs one of them mid-run. The survivors must pick up what the dead
// process held once its AckWait expires, and the table must hold each
// message exactly once (unique (stream, sequence) keys), with everything
// acknowledged and nothing pending. Every process must have done a share
// of the work: that is what scale-out means.
func TestFaultScaleOutKill(t *testing.T) {
	dsn := natstest.Service(t, postgresDSNEnv)
	for _, procs := range []int{2, 3} {
		t.Run(strconv.Itoa(procs), func(t *testing.T) {
			n := 20000
			if soak() {
				n = 200000
			}
			stream, consumer := fmt.Sprintf("FSCALE%d", procs), fmt.Sprintf("fscale%d", procs)
			subject := fmt.Sprintf("fscale%d.events", procs)
			s := natstest.RunJetStream(t)
			_, js := natstest.Connect(t, s)
			natstest.CreateStream(t, js, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}})
			table := pgTable(t, dsn)
			d := newRunDoc([]string{s.ClientURL()}, stream, consumer, subject, postgresSink(t, dsn, table))
			// Small batches, one at a time: the run lasts long enough to be
			// killed mid-way, and every process gets many fetches.
			d.Delivery = with(d.Delivery, "batch_size", 50, "max_in_flight_batches", 1)

			fleet := make([]*member, procs)
			for i := range fleet {
				fleet[i] = startMember(t, d) // each is bound and fetching when this returns
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer conn.Close(ctx)

			// Publish only now, so every process competes from the first
			// message.
			natstest.PublishN(t, js, subject, n, body)
			natstest.WaitFor(t, time.Minute, func() error {
				var rows int
				if err := conn.QueryRow(ctx, "select count(*) from "+table).Scan(&rows); err != nil || rows < n/4 {
					return fmt.Errorf("%d rows (%v), waiting for %d", rows, err, n/4)
				}
				return nil
			})
			victim := fleet[0]
			victim.scrape() // its last counts, kept for the report
			victim.kill(t)
			_, floor, pending, _ := deliveries(ctx, js, stream, consumer)
			t.Logf("SIGKILLed process 0: ack floor %d, ack pending %d", floor, pending)
			if floor >= uint64(n) {
				t.Fatal("every message was acknowledged before the kill; the test no longer hits a run in flight")
			}

			waitAllAcked(t, js, stream, consumer, n, 3*time.Minute)
			for _, m := range fleet[1:] {
				m.settle(t)
			}
			redelivered := redeliveries(t, js, stream, consumer, n)
			var acked float64
			for i, m := range fleet {
				got := countsOf(m.last) // the killed process: its last scrape
				if i > 0 {
					got = m.counts(t)
				}
				t.Logf("process %d (killed %v): %s", i, i == 0, got)
				acked += got.acked
				if got.acked == 0 {
					t.Errorf("process %d acknowledged nothing: the consumer did not share the work", i)
				}
			}
			t.Logf("%d processes: %d redeliveries (consumer deliveries − %d), %.0f ACKs counted by the processes",
				procs, redelivered, n, acked)
			for _, m := range fleet[1:] {
				m.stop(t)
			}
			checkRows(t, dsn, table, stream, subject, n)
		})
	}
}

// postgresSink is the postgres sink writing to table on the server at dsn
// (the same settings as postgresConfig).
func postgresSink(t *testing.T, dsn, table string) map[string]any {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse postgres DSN: %v", err)
	}
	password := cc.Password
	if password == "" {
		password = "unused" // the test servers trust local connections
	}
	return map[string]any{
		"type": "postgres", "host": cc.Host, "port": cc.Port, "database": cc.Database, "user": cc.User,
		"password": password, "sslmode": "disable", "connect_timeout_seconds": 2, "table": table,
		"auto_create": true,
	}
}
