package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/internal/tcpproxy"
)

// ackSeq returns the stream sequence of a JetStream ACK reply subject
// ($JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.… or, with domain and
// account hash, $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.…).
func ackSeq(subject string) (uint64, bool) {
	tok := strings.Split(subject, ".")
	i := 5
	if len(tok) >= 12 {
		i = 7
	}
	if len(tok) <= i {
		return 0, false
	}
	seq, err := strconv.ParseUint(tok[i], 10, 64)
	return seq, err == nil
}

// TestFanoutAcksOnWire watches the ACKs the binary sends on the wire while
// it fans out to a file and a SQLite target (both required) and a
// PostgreSQL target (optional) reached through a TCP proxy. At each ACK it
// checks that the message is already in every required target it routes
// to. Halfway through, the proxy stalls (PostgreSQL looks hung): ACKs must
// keep flowing, each batch held at most by the optional timeout.
func TestFanoutAcksOnWire(t *testing.T) {
	const n = 3000
	dsn := natstest.Service(t, postgresDSNEnv)
	table := pgTable(t, dsn)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password := cc.Password
	if password == "" {
		password = "unused"
	}
	proxy := tcpproxy.Start(t, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "FANW", Subjects: []string{"fanw.>"}})
	routeOf := make([]string, n+1)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			subj := []string{"fanw.a", "fanw.b"}[i%2]
			routeOf[i+1] = subj
			if _, err := js.Publish(context.Background(), subj, body(i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	dir := t.TempDir()
	dbPath := filepath.Join(t.TempDir(), "fan.db")
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "FANW", "consumer": "fanw", "subject": "fanw.>"},
  "consumer_management": {"ack_wait_seconds": 30, "max_ack_pending": 2000},
  "delivery": {"batch_size": 100, "max_in_flight_batches": 4, "batch_timeout_ms": 100,
               "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000},
  "logging": {"level": "WARNING"},
  "sinks": {
    "archive": {"type": "file", "directory": %q, "fsync": true},
    "db": {"type": "sqlite", "path": %q},
    "pg": {"type": "postgres", "host": "127.0.0.1", "port": %d, "database": %q, "user": %q, "password": %q,
           "sslmode": "disable", "connect_timeout_seconds": 2, "table": %q, "auto_create": true}
  },
  "routing": {"enabled": true, "routes": [
    {"name": "a", "match": {"subject": "fanw.a"}, "targets": ["archive", "db", {"sink": "pg", "required": false, "minimum_wait_ms": 100, "timeout_ms": 500}]},
    {"name": "b", "match": {"subject": "fanw.b"}, "targets": ["db", {"sink": "pg", "required": false, "minimum_wait_ms": 100, "timeout_ms": 500}]}
  ]},
  "sink": {"type": "fanout"}
}`, s.ClientURL(), dir, dbPath, proxy.Port(), cc.Database, cc.User, password, table)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	// The sink creates the SQLite file; open it for reading once it exists.
	var (
		mu      sync.Mutex
		db      *sql.DB
		acked   = map[uint64]int{}
		early   []string
		ackedAt = map[uint64]time.Time{}
	)
	inFile := func(seq uint64) bool {
		// partition_by_subject (the default) puts fanw.a records under fanw.a/.
		_, err := os.Stat(filepath.Join(dir, "fanw.a", fmt.Sprintf("FANW-%020d.json", seq)))
		return err == nil
	}
	inDB := func(seq uint64) bool {
		if db == nil {
			if _, err := os.Stat(dbPath); err != nil {
				return false
			}
			var err error
			if db, err = sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)"); err != nil {
				return false
			}
		}
		var one int
		return db.QueryRow("select 1 from nats_sink_events where stream_sequence = ?", seq).Scan(&one) == nil
	}
	sub, err := nc.Subscribe("$JS.ACK.FANW.fanw.>", func(m *nats.Msg) {
		if b := string(m.Data); b != "" && b != "+ACK" {
			return // NAK, WPI, TERM: not an acknowledgement
		}
		seq, ok := ackSeq(m.Subject)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		acked[seq]++
		ackedAt[seq] = time.Now()
		// The ACK is on the wire: every required copy must be durable.
		if routeOf[seq] == "fanw.a" && !inFile(seq) {
			early = append(early, fmt.Sprintf("%d ACKed before the file target held it", seq))
		}
		if !inDB(seq) {
			early = append(early, fmt.Sprintf("%d ACKed before the SQLite target held it", seq))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	t.Cleanup(func() {
		if db != nil {
			db.Close()
		}
	})

	publish(0, n/2)
	p := start(t, cfg)
	waitDone(t, js, "FANW", "fanw", n/2, 2*time.Minute)

	// PostgreSQL hangs: no byte passes the proxy.
	proxy.Stall()
	stalled := time.Now()
	publish(n/2, n)
	waitDone(t, js, "FANW", "fanw", n, 2*time.Minute)
	took := time.Since(stalled)
	t.Logf("second half (%d messages) acknowledged %v after the stall began", n/2, took.Round(time.Millisecond))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pgFirst, pgSecond int
	if err := conn.QueryRow(ctx, "select count(*) filter (where stream_sequence <= $1), count(*) filter (where stream_sequence > $1) from "+table, n/2).Scan(&pgFirst, &pgSecond); err != nil {
		t.Fatal(err)
	}
	t.Logf("pg (optional) holds %d of the first half, %d of the second (stalled)", pgFirst, pgSecond)
	if pgSecond != 0 {
		t.Errorf("pg holds %d messages published during the stall; the proxy let bytes through", pgSecond)
	}
	proxy.Resume()
	p.stop(t)

	// The handler checks every ACK against the targets and can trail the
	// wire by seconds: wait until it has taken every ACK the client
	// received (holding mu then waits for the one in progress).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		queued, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		if queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ACKs still queued for the checking handler after 2 minutes", queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dropped, err := sub.Dropped(); err != nil || dropped > 0 {
		t.Errorf("the ACK subscription dropped %d messages (%v): the wire check is incomplete", dropped, err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, e := range early[:min(len(early), 10)] {
		t.Error(e)
	}
	if len(early) > 10 {
		t.Errorf("… %d early ACKs in all", len(early))
	}
	missing := 0
	for seq := uint64(1); seq <= n; seq++ {
		if acked[seq] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d messages never seen ACKed on the wire", missing, n)
	}
}
