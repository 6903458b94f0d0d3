package oracle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sijms/go-ora/v2/network"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// call is one statement a fake transaction received.
type call struct {
	SQL  string
	Args []namedArg
}

// fakeTx is a hand-written execer: it records statements and answers each
// with affected(call) or fail(call).
type fakeTx struct {
	calls      []call
	affected   func(c call) int64 // nil: number of rows bound
	fail       func(c call) error
	commitErr  error
	committed  bool
	rolledBack bool
}

type result int64

func (r result) LastInsertId() (int64, error) { return 0, errors.New("no id") }
func (r result) RowsAffected() (int64, error) { return int64(r), nil }

func (f *fakeTx) ExecContext(_ context.Context, q string, args ...any) (sql.Result, error) {
	c := call{SQL: q}
	for _, a := range args {
		n := a.(sql.NamedArg)
		c.Args = append(c.Args, namedArg{Name: n.Name, Value: n.Value})
	}
	f.calls = append(f.calls, c)
	if f.fail != nil {
		if err := f.fail(c); err != nil {
			return nil, err
		}
	}
	if f.affected != nil {
		return result(f.affected(c)), nil
	}
	return result(rowsBound(c)), nil
}

func (f *fakeTx) Commit() error   { f.committed = true; return f.commitErr }
func (f *fakeTx) Rollback() error { f.rolledBack = true; return nil }

// rowsBound is the array length of a call's binds (1 for scalars).
func rowsBound(c call) int64 {
	for _, a := range c.Args {
		if v, ok := a.Value.([]any); ok {
			return int64(len(v))
		}
	}
	return 1
}

// harness wires a Sink to one fakeTx per WriteBatch, with fixed batch ids
// ("batch1", "batch2", …) and metrics.
type harness struct {
	s     *Sink
	txs   []*fakeTx
	setup func(*fakeTx)
	begun int
}

func newHarness(t *testing.T, extra string, setup func(*fakeTx)) *harness {
	t.Helper()
	c := decode(t, extra)
	tm, err := telemetry.NewMetrics(nil, "nats_sinks")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{s: testSink(t, c, tm.ForSinks()), setup: setup}
	ids := 0
	h.s.w.Begin = func(context.Context) (sqlmodel.Tx, error) {
		h.begun++
		f := &fakeTx{}
		if h.setup != nil {
			h.setup(f)
		}
		h.txs = append(h.txs, f)
		return &tx{s: h.s, x: f, newBatchID: func() string { ids++; return fmt.Sprintf("batch%d", ids) }}, nil
	}
	h.s.w.Now = func() time.Time { return shapestest.Stored }
	return h
}

func env(subject string, seq uint64) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.ORDERS.c.1.%d.%d.1780048800123456000.0", seq, seq)
	return intake.Build(intake.Message{Subject: subject, Reply: reply, Data: []byte(fmt.Sprintf(`{"n":%d}`, seq))}, nil, shapestest.Received)
}

func outcomes(rs []sink.Result) string {
	var b []string
	for _, r := range rs {
		s := r.Outcome.String()
		if r.Shared {
			s += "(shared)"
		}
		if r.ErrorType != "" {
			s += "/" + r.ErrorType
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// sqls returns the statement texts, with the sink's plan texts replaced
// by short names so the order reads clearly.
func (h *harness) sqls(f *fakeTx) []string {
	names := map[string]string{}
	for tb, p := range h.s.plans {
		names[p.write] = "write " + tb.Name
		names[p.stageInsert] = "stage-insert"
		names[p.stageMerge] = "stage-merge " + tb.Name
		names[p.stageDelete] = "stage-delete"
	}
	var out []string
	for _, c := range f.calls {
		n, ok := names[c.SQL]
		if !ok {
			n = c.SQL
		}
		out = append(out, n)
	}
	return out
}

func seqs(c call) []any {
	for _, a := range c.Args {
		if a.Name == "stream_sequence" {
			return a.Value.([]any)
		}
	}
	return nil
}

func TestWriteBatchDirect(t *testing.T) {
	h := newHarness(t, `"table_routes":[{"subject":"audit.>","table":"audit_events"}]`, nil)
	got := h.s.WriteBatch(t.Context(), []*sink.Envelope{env("orders.a", 1), env("audit.x", 2), env("orders.b", 3)})
	if o := outcomes(got); o != "committed committed committed" {
		t.Fatalf("outcomes = %s", o)
	}
	f := h.txs[0]
	// One array-bound execution per table, in first-appearance order,
	// then COMMIT.
	if diff := cmp.Diff([]string{"write NATS_SINK_EVENTS", "write AUDIT_EVENTS"}, h.sqls(f)); diff != "" {
		t.Errorf("statements (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]any{{int64(1), int64(3)}, {int64(2)}}, [][]any{seqs(f.calls[0]), seqs(f.calls[1])}); diff != "" {
		t.Errorf("bound sequences (-want +got):\n%s", diff)
	}
	if len(f.calls[0].Args) != int(sqlmodel.NumFields) || f.calls[0].Args[0].Name != "stream_name" {
		t.Errorf("binds = %v, want the 16 field binds", f.calls[0].Args)
	}
	if !f.committed || f.rolledBack {
		t.Errorf("committed=%v rolledBack=%v, want commit only", f.committed, f.rolledBack)
	}
	if n := h.s.m.Rows.(*telemetry.Counter).Value(); n != 3 {
		t.Errorf("oracle_merge_rows_total = %d, want 3", n)
	}
	if n := h.s.m.Unknown.(*telemetry.Counter).Value(); n != 3 {
		t.Errorf("oracle_merge_outcome_unknown_total = %d, want 3", n)
	}
}

func TestWriteBatchStaging(t *testing.T) {
	for _, tt := range []struct {
		name  string
		extra string
		want  []string
	}{
		{"delete_on_success", `"staging":{"enabled":true,"table":"stage"}`,
			[]string{"stage-insert", "stage-merge NATS_SINK_EVENTS", "stage-delete", "stage-insert", "stage-merge AUDIT_EVENTS", "stage-delete"}},
		{"keep", `"mode":"insert_ignore","staging":{"enabled":true,"table":"stage","cleanup":"keep"}`,
			[]string{"stage-insert", "stage-merge NATS_SINK_EVENTS", "stage-insert", "stage-merge AUDIT_EVENTS"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.extra+`,"table_routes":[{"subject":"audit.>","table":"audit_events"}]`, nil)
			got := h.s.WriteBatch(t.Context(), []*sink.Envelope{env("orders.a", 1), env("orders.b", 2), env("audit.x", 3)})
			if o := outcomes(got); o != "committed committed committed" {
				t.Fatalf("outcomes = %s", o)
			}
			f := h.txs[0]
			if diff := cmp.Diff(tt.want, h.sqls(f)); diff != "" {
				t.Errorf("statements (-want +got):\n%s", diff)
			}
			// The staging insert binds the group's batch id once per row;
			// the merge and delete bind it as a scalar. Each table group
			// has its own id.
			ins := f.calls[0]
			if diff := cmp.Diff(namedArg{Name: "nats_sinks_batch_id", Value: []any{"batch1", "batch1"}}, ins.Args[0]); diff != "" {
				t.Errorf("staging insert batch bind (-want +got):\n%s", diff)
			}
			if len(ins.Args) != 1+int(sqlmodel.NumFields) {
				t.Errorf("staging insert has %d binds, want 17", len(ins.Args))
			}
			if diff := cmp.Diff([]namedArg{{Name: "nats_sinks_batch_id", Value: "batch1"}}, f.calls[1].Args); diff != "" {
				t.Errorf("merge binds (-want +got):\n%s", diff)
			}
			second := f.calls[len(f.calls)/2]
			if diff := cmp.Diff(namedArg{Name: "nats_sinks_batch_id", Value: []any{"batch2"}}, second.Args[0]); diff != "" {
				t.Errorf("second group's batch bind (-want +got):\n%s", diff)
			}
			if !f.committed {
				t.Error("not committed")
			}
		})
	}
}

func TestBatchIDFormat(t *testing.T) {
	id := batchID()
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		t.Errorf("batchID() = %q, want 32 lower-case hex characters", id)
	}
	if batchID() == id {
		t.Error("two batch ids are equal")
	}
}

func oraErr(code int) error {
	return &network.OracleError{ErrCode: code, ErrMsg: fmt.Sprintf("ORA-%05d: test", code)}
}

func TestWriteBatchFailures(t *testing.T) {
	for _, tt := range []struct {
		name      string
		extra     string
		fail      func(c call) error
		commitErr error
		affected  func(c call) int64
		want      string
		committed bool
		conflicts uint64
	}{
		{"duplicate key in merge is permanent", ``, func(call) error { return oraErr(1) }, nil, nil,
			"permanent(shared)/PermanentSinkError permanent(shared)/PermanentSinkError", false, 1},
		{"duplicate key in insert_ignore is temporary (docs/migrating.md Q11)", `"mode":"insert_ignore"`, func(call) error { return oraErr(1) }, nil, nil,
			"temporary(shared) temporary(shared)", false, 1},
		{"missing table is a destination failure", `"mode":"insert"`, func(call) error { return oraErr(942) }, nil, nil,
			"destination(shared) destination(shared)", false, 0},
		{"value too large is permanent (docs/migrating.md Q22)", ``, func(call) error { return oraErr(12899) }, nil, nil,
			"permanent(shared)/PermanentSinkError permanent(shared)/PermanentSinkError", false, 0},
		{"staging delete failure rolls back everything", `"staging":{"enabled":true,"table":"stage"}`, func(c call) error {
			if strings.HasPrefix(c.SQL, "delete") {
				return errors.New("connection reset")
			}
			return nil
		}, nil, nil, "temporary(shared) temporary(shared)", false, 0},
		{"commit error is temporary: outcome unknown", ``, nil, errors.New("ORA-03113: end-of-file on communication channel"), nil,
			"temporary(shared) temporary(shared)", true, 0},
		{"nothing affected in insert_ignore means duplicates", `"mode":"insert_ignore"`, nil, nil, func(call) int64 { return 0 },
			"duplicate duplicate", true, 0},
		{"nothing affected in merge without updates means duplicates", `"merge_update_columns":[]`, nil, nil, func(call) int64 { return 0 },
			"duplicate duplicate", true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.extra, func(f *fakeTx) { f.fail, f.commitErr, f.affected = tt.fail, tt.commitErr, tt.affected })
			got := h.s.WriteBatch(t.Context(), []*sink.Envelope{env("orders.a", 1), env("orders.b", 2)})
			if o := outcomes(got); o != tt.want {
				t.Errorf("outcomes = %s, want %s", o, tt.want)
			}
			f := h.txs[0]
			if f.committed != tt.committed || f.rolledBack == tt.committed {
				t.Errorf("committed=%v rolledBack=%v, want committed=%v and rolled back otherwise", f.committed, f.rolledBack, tt.committed)
			}
			if n := h.s.m.Conflicts.(*telemetry.Counter).Value(); n != tt.conflicts {
				t.Errorf("oracle_conflicts_total = %d, want %d", n, tt.conflicts)
			}
		})
	}
}

func TestWriteBatchDuplicateMetrics(t *testing.T) {
	// insert_ignore: 3 rows attempted, 1 inserted → 2 ignored duplicates
	// (the Writer cannot tell which, so rows stay Committed).
	h := newHarness(t, `"mode":"insert_ignore"`, func(f *fakeTx) { f.affected = func(call) int64 { return 1 } })
	got := h.s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1), env("o", 2), env("o", 3)})
	if o := outcomes(got); o != "committed committed committed" {
		t.Errorf("outcomes = %s", o)
	}
	if a, b := h.s.m.Ignored.(*telemetry.Counter).Value(), h.s.m.Duplicates.(*telemetry.Counter).Value(); a != 2 || b != 2 {
		t.Errorf("duplicate_ignored = %d, duplicates = %d; want 2, 2", a, b)
	}

	// merge with []: the same count is a no-op count.
	h = newHarness(t, `"merge_update_columns":[]`, func(f *fakeTx) { f.affected = func(call) int64 { return 2 } })
	h.s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1), env("o", 2), env("o", 3)})
	if a := h.s.m.Noop.(*telemetry.Counter).Value(); a != 1 {
		t.Errorf("duplicate_noop = %d, want 1", a)
	}
}

func TestWriteBatchRowsBuiltFirst(t *testing.T) {
	// A message without stream metadata cannot be keyed: it is Permanent
	// on its own (not Shared) and never reaches the database; the rest
	// commit. A repeated key inside the batch is reduced before the
	// statement: merge keeps the last, reporting the first Duplicate.
	h := newHarness(t, ``, nil)
	noMeta := intake.Build(intake.Message{Subject: "orders.x", Data: []byte(`{}`)}, nil, shapestest.Received)
	got := h.s.WriteBatch(t.Context(), []*sink.Envelope{env("o", 1), noMeta, env("o", 1), env("o", 2)})
	if o := outcomes(got); o != "duplicate permanent/ValidationError committed committed" {
		t.Errorf("outcomes = %s", o)
	}
	if diff := cmp.Diff([]any{int64(1), int64(2)}, seqs(h.txs[0].calls[0])); diff != "" {
		t.Errorf("bound sequences (-want +got):\n%s", diff)
	}
}

func TestWriteBatchCancelled(t *testing.T) {
	h := newHarness(t, ``, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	got := h.s.WriteBatch(ctx, []*sink.Envelope{env("o", 1)})
	if o := outcomes(got); o != "temporary(shared)" {
		t.Errorf("outcomes = %s", o)
	}
	if h.begun != 0 {
		t.Errorf("began %d transactions after cancellation", h.begun)
	}
}

func TestChunks(t *testing.T) {
	rows := make([]*sqlmodel.Row, 2*maxArrayRows+1)
	var sizes []int
	for _, c := range chunks(rows) {
		sizes = append(sizes, len(c))
	}
	if diff := cmp.Diff([]int{maxArrayRows, maxArrayRows, 1}, sizes); diff != "" {
		t.Errorf("chunk sizes (-want +got):\n%s", diff)
	}
}
