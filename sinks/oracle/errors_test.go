package oracle

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestClassify(t *testing.T) {
	const (
		perm = sink.Permanent
		temp = sink.Temporary
		dest = sink.Destination
	)
	for _, tt := range []struct {
		code int
		mode sqlmodel.Mode
		want sink.Outcome
	}{
		{1, sqlmodel.Insert, perm},
		{1, sqlmodel.Append, perm},
		{1, sqlmodel.Merge, perm},
		{1, sqlmodel.InsertIgnore, temp},
		{1400, sqlmodel.Merge, perm},
		{1438, sqlmodel.Merge, perm},
		{2290, sqlmodel.Merge, perm},
		{12899, sqlmodel.InsertIgnore, perm},
		{40441, sqlmodel.Insert, perm},
		{1017, sqlmodel.Merge, dest},
		{942, sqlmodel.Merge, dest},
		{904, sqlmodel.Merge, dest},
		{1031, sqlmodel.Merge, dest},
		{28000, sqlmodel.Merge, dest},
		{12154, sqlmodel.Merge, dest},
		{12514, sqlmodel.Merge, dest},
		{3113, sqlmodel.Merge, temp},  // end-of-file on communication channel
		{60, sqlmodel.Merge, temp},    // deadlock
		{30926, sqlmodel.Merge, temp}, // unstable set of rows
		{1653, sqlmodel.Merge, temp},  // unable to extend table
	} {
		for _, form := range []struct {
			name string
			err  error
		}{
			{"go-ora error", fmt.Errorf("merge (stream seq 1…2): %w", oraErr(tt.code))},
			{"text only", fmt.Errorf("connect: ORA-%05d: refused", tt.code)},
		} {
			t.Run(fmt.Sprintf("ORA-%05d %s %s", tt.code, tt.mode, form.name), func(t *testing.T) {
				s := testSink(t, decode(t, `"mode":"`+string(tt.mode)+`"`))
				got := sink.Failed(s.classify(form.err))
				if got.Outcome != tt.want {
					t.Errorf("classify(ORA-%05d) in %s = %v, want %v", tt.code, tt.mode, got.Outcome, tt.want)
				}
				if !errors.Is(got.Err, form.err) {
					t.Errorf("classified error lost its cause: %v", got.Err)
				}
			})
		}
	}
	s := testSink(t, decode(t, ""))
	if got := sink.Failed(s.classify(errors.New("dial tcp 10.0.0.1:1521: i/o timeout"))); got.Outcome != sink.Temporary {
		t.Errorf("network error = %v, want temporary", got.Outcome)
	}
}

// fakeConnector and fakeConn stand in for go-ora: the connector's retry
// and session set-up logic needs no server.
type fakeConnector struct {
	errs  []error // returned by successive attempts; then success
	calls int
	conns []*fakeConn
}

func (f *fakeConnector) Connect(context.Context) (driver.Conn, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	c := &fakeConn{}
	f.conns = append(f.conns, c)
	return c, nil
}

func (f *fakeConnector) Driver() driver.Driver { return nil }

type fakeConn struct {
	execs   []string
	execErr error
	closed  bool
}

func (c *fakeConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	c.execs = append(c.execs, q)
	return driver.RowsAffected(0), c.execErr
}
func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not implemented") }
func (c *fakeConn) Close() error                        { c.closed = true; return nil }
func (c *fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("not implemented") }

func TestConnectorRetries(t *testing.T) {
	network := errors.New("dial tcp: connection refused")
	for _, tt := range []struct {
		name      string
		retries   int
		errs      []error
		wantCalls int
		wantErr   bool
		wantWaits []time.Duration
	}{
		{"no retries by default", 0, []error{network}, 1, true, nil},
		{"retried until success", 2, []error{network, network}, 3, false, []time.Duration{3 * time.Second, 3 * time.Second}},
		{"gives up after retry_count", 1, []error{network, network}, 2, true, []time.Duration{3 * time.Second}},
		{"bad credentials are not retried", 3, []error{oraErr(1017)}, 1, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inner := &fakeConnector{errs: tt.errs}
			var waits []time.Duration
			c := &connector{inner: inner, mode: sqlmodel.Merge, retries: tt.retries, delay: 3 * time.Second,
				setup: []string{"alter session disable parallel dml"},
				wait:  func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			conn, err := c.Connect(t.Context())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Connect error = %v, want error %v", err, tt.wantErr)
			}
			if inner.calls != tt.wantCalls {
				t.Errorf("attempts = %d, want %d", inner.calls, tt.wantCalls)
			}
			if diff := cmp.Diff(tt.wantWaits, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if err == nil {
				if diff := cmp.Diff([]string{"alter session disable parallel dml"}, conn.(*fakeConn).execs); diff != "" {
					t.Errorf("session set-up (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestConnectorSetupFailure(t *testing.T) {
	inner := &fakeConnector{}
	c := &connector{inner: inner, setup: []string{"alter session disable parallel dml"}}
	inner.errs = nil
	// The first connection's set-up fails: the session is closed, not
	// handed to the pool half-configured.
	fc := &fakeConn{execErr: oraErr(1031)}
	c.inner = connectorFunc(func() (driver.Conn, error) { return fc, nil })
	if _, err := c.Connect(t.Context()); err == nil {
		t.Fatal("Connect succeeded despite a failed set-up statement")
	}
	if !fc.closed {
		t.Error("connection not closed after failed set-up")
	}
	// Without set-up statements nothing is executed.
	c = &connector{inner: inner}
	conn, err := c.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(conn.(*fakeConn).execs); n != 0 {
		t.Errorf("executed %d set-up statements, want 0", n)
	}
}

type connectorFunc func() (driver.Conn, error)

func (f connectorFunc) Connect(context.Context) (driver.Conn, error) { return f() }
func (f connectorFunc) Driver() driver.Driver                        { return nil }

func TestHealthQueries(t *testing.T) {
	s := testSink(t, decode(t, `"table_routes":[{"subject":"a.>","table":"a_events"}]`))
	want := []string{
		"select " + cols + " from NATS_SINK_EVENTS where 1 = 0",
		"select " + cols + " from A_EVENTS where 1 = 0",
	}
	if diff := cmp.Diff(want, s.healthQueries()); diff != "" {
		t.Errorf("health queries (-want +got):\n%s", diff)
	}
}
