package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// mysqlDB is the test MySQL/MariaDB server: an admin handle for checks and
// the connection keys of a mysql sink configuration.
type mysqlDB struct {
	admin                    *sql.DB
	host                     string
	port                     int
	database, user, password string
}

// mysqlServer connects to NATS_SINKS_TEST_MYSQL_DSN (skipped when unset,
// failing in CI). The sink requires a password; when the DSN has none a
// password-protected test user is created for the DSN's database.
func mysqlServer(t *testing.T) *mysqlDB {
	t.Helper()
	dsn := natstest.Service(t, "NATS_SINKS_TEST_MYSQL_DSN")
	dc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN: %v", err)
	}
	host, portText, err := net.SplitHostPort(dc.Addr)
	if err != nil {
		t.Fatalf("NATS_SINKS_TEST_MYSQL_DSN address %q: %v", dc.Addr, err)
	}
	port, _ := strconv.Atoi(portText)
	dc.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	db := &mysqlDB{admin: sql.OpenDB(conn), host: host, port: port, database: dc.DBName, user: dc.User, password: dc.Passwd}
	t.Cleanup(func() { db.admin.Close() })
	if db.password == "" {
		const user, pw = "nats_sink_e2e", "nats-sink-e2e-pw"
		for _, h := range []string{"%", "localhost"} {
			for _, q := range []string{
				fmt.Sprintf("create user if not exists '%s'@'%s' identified by '%s'", user, h, pw),
				fmt.Sprintf("alter user '%s'@'%s' identified by '%s'", user, h, pw),
				fmt.Sprintf("grant all on `%s`.* to '%s'@'%s'", dc.DBName, user, h),
			} {
				if _, err := db.admin.Exec(q); err != nil {
					t.Fatalf("create test user: %v", err)
				}
			}
		}
		db.user, db.password = user, pw
	}
	return db
}

// mysqlConfig writes a run configuration for a mysql sink (auto_create,
// the default upsert mode) into table and returns its path.
func mysqlConfig(t *testing.T, url, stream, consumer, subject string, db *mysqlDB, table string) string {
	t.Helper()
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": %q, "consumer": %q, "subject": %q},
  "consumer_management": {"ack_wait_seconds": 3, "max_ack_pending": 4000},
  "delivery": {"batch_size": 250, "max_in_flight_batches": 4, "batch_timeout_ms": 200,
               "retry_backoff_ms": 100, "shutdown_timeout_ms": 10000},
  "logging": {"level": "WARNING"},
  "sink": {"type": "mysql", "host": %q, "port": %d, "database": %q, "user": %q, "password": %q,
           "table": %q, "auto_create": true, "pool_size": 4}
}`, url, stream, consumer, subject, db.host, db.port, db.database, db.user, db.password, table)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMySQLCrashRecovery publishes 5,000 messages, SIGKILLs the real binary
// twice while it writes them into MySQL/MariaDB, restarts it, and checks
// the table: exactly one row per message, and payload and metadata columns
// that match what was published.
func TestMySQLCrashRecovery(t *testing.T) {
	const n = 5000
	db := mysqlServer(t)
	b := make([]byte, 6)
	rand.Read(b)
	table := "e2e_" + hex.EncodeToString(b)
	t.Cleanup(func() { db.admin.Exec("drop table if exists `" + table + "`") })

	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	st := natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "MYSQLE2E", Subjects: []string{"mysqle2e.>"}})
	natstest.PublishN(t, js, "mysqle2e.events", n, body)
	cfg := mysqlConfig(t, s.ClientURL(), "MYSQLE2E", "mysql-e2e", "mysqle2e.>", db, table)

	ctx := context.Background()
	rows := func() int {
		var c int
		if err := db.admin.QueryRowContext(ctx, "select count(*) from `"+table+"`").Scan(&c); err != nil {
			return -1 // not created yet
		}
		return c
	}
	// Kill once some rows are in and again further on: both kills land
	// while batches are being written, committed and acknowledged.
	for round, threshold := range []int{1, 1500} {
		p := start(t, cfg)
		natstest.WaitFor(t, 2*time.Minute, func() error {
			if c := rows(); c < threshold {
				select {
				case <-p.done:
					t.Fatalf("nats-sink exited early:\n%s", p.stderr.String())
				default:
				}
				return fmt.Errorf("%d rows, waiting for %d", c, threshold)
			}
			return nil
		})
		p.kill(t)
		floor, pending, err := ackState(ctx, js, "MYSQLE2E", "mysql-e2e")
		t.Logf("round %d: killed at %d rows; ack floor %d, ack pending %d (%v)", round, rows(), floor, pending, err)
	}

	p := start(t, cfg)
	natstest.WaitFor(t, 3*time.Minute, func() error {
		floor, pending, err := ackState(ctx, js, "MYSQLE2E", "mysql-e2e")
		if err != nil {
			return err
		}
		if floor != n || pending != 0 {
			return fmt.Errorf("ack floor %d, ack pending %d; want %d, 0", floor, pending, n)
		}
		return nil
	})
	p.stop(t)

	var total, distinct int
	if err := db.admin.QueryRowContext(ctx, "select count(*), count(distinct STREAM_NAME, STREAM_SEQUENCE) from `"+table+"`").Scan(&total, &distinct); err != nil {
		t.Fatal(err)
	}
	if total != n || distinct != n {
		t.Fatalf("rows %d, distinct keys %d; want %d each", total, distinct, n)
	}
	res, err := db.admin.QueryContext(ctx, "select STREAM_NAME, STREAM_SEQUENCE, SUBJECT, PAYLOAD_JSON, METADATA_JSON from `"+table+"` order by STREAM_SEQUENCE")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	want := uint64(1)
	for res.Next() {
		var stream, subject, payload, meta string
		var seq uint64
		if err := res.Scan(&stream, &seq, &subject, &payload, &meta); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("stream sequence %d missing (next row holds %d)", want, seq)
		}
		want++
		msg, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		published, err := jsonx.Parse(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := jsonx.Parse([]byte(payload))
		if err != nil {
			t.Fatalf("seq %d: PAYLOAD_JSON is not JSON: %v", seq, err)
		}
		if diff := cmp.Diff(published, stored); diff != "" || stream != "MYSQLE2E" || subject != msg.Subject {
			t.Fatalf("seq %d: stream %s, subject %s; payload (-published +stored):\n%s", seq, stream, subject, diff)
		}
		m, err := jsonx.Parse([]byte(meta))
		if err != nil {
			t.Fatalf("seq %d: METADATA_JSON is not JSON: %v", seq, err)
		}
		doc, _ := m.(map[string]any)
		js, _ := doc["jetstream"].(map[string]any)
		pl, _ := doc["payload"].(map[string]any)
		got := []any{doc["subject"], js["stream"], js["stream_sequence"], js["consumer"], pl["delivered_size_bytes"], doc["custody"], doc["metadata_version"]}
		wantMeta := []any{msg.Subject, "MYSQLE2E", jsonx.Integer(strconv.FormatUint(seq, 10)), "mysql-e2e",
			jsonx.Integer(strconv.Itoa(len(msg.Data))), nil, jsonx.Integer("1")}
		if diff := cmp.Diff(wantMeta, got); diff != "" {
			t.Fatalf("seq %d: metadata subject, stream, sequence, consumer, size, custody, version (-want +got):\n%s", seq, diff)
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
}
