package clickhousetest_test

import (
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/clickhousetest"
)

// TestRunRestart starts a private server, writes a row, kills the server
// and restarts it on the same data: the row is still there.
func TestRunRestart(t *testing.T) {
	s := clickhousetest.Run(t)
	if s.Pid() == 0 {
		t.Fatal("Pid() = 0 for a running private server")
	}
	s.MustQuery(t, "CREATE TABLE t (k UInt64) ENGINE = MergeTree ORDER BY k")
	s.MustQuery(t, "INSERT INTO t VALUES (7)")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Query("SELECT 1"); err == nil {
		t.Fatal("query succeeded after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(s.MustQuery(t, "SELECT sum(k) FROM t")); got != "7" {
		t.Errorf("after restart sum = %q, want 7", got)
	}
	if _, err := clickhousetest.Query(s.URL, clickhousetest.User, "wrong", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "HTTP 401") && !strings.Contains(err.Error(), "Code: 193") {
		t.Errorf("wrong password: err = %v, want an authentication failure", err)
	}
}
