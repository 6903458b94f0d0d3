package sqlmodel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

func TestGoldenRow(t *testing.T) {
	m := compile(t, Postgres, `{}`)
	r, err := m.BuildRow(shapestest.Golden(), shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	// The metadata column is the golden file record's metadata (docs/delivery.md#ack-order)
	// plus "custody": null, as ascii JSON.
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "record", "testdata", "file_record_compact.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := jsonx.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	md := rec.(map[string]any)["metadata"].(map[string]any)
	md["custody"] = nil
	want := [NumFields]any{
		"ORDERS", int64(42), "orders.created", "O-1001", "high", nil, "billing;eu",
		int64(1780048799500000000), int64(1780048800123456000), int64(1780048800250000000), int64(1780048800300000000),
		`{"amount":42.5,"note":"caf\u00e9","order_id":"O-1001"}`,
		`{"Nats-Msg-Id":"O-1001","Nats-Sinks-Labels":"billing; eu ;billing","Nats-Sinks-Priority":"high","Nats-Time-Stamp":"2026-05-29T09:59:59.5Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		string(jsonx.Marshal(md, jsonx.ASCII)),
		"null", "null",
	}
	if diff := cmp.Diff(want, r.Values); diff != "" {
		t.Errorf("row values (-want +got):\n%s", diff)
	}
	if r.Table != m.Tables[0] {
		t.Errorf("row table = %v", r.Table.Name)
	}
}

func TestRowNullsAndHeaders(t *testing.T) {
	m := compile(t, SQLite, `{"idempotency":{"strategy":"message_id"}}`)
	e := intake.Build(intake.Message{Subject: "a", Data: []byte("x"), Header: map[string][]string{"Nats-Msg-Id": {"m1"}}}, nil, shapestest.Received)
	e.Headers = nil
	r, err := m.BuildRow(e, shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Field{StreamName, StreamSequence, Priority, Classification, Labels, MessageCreatedAtEpochNS, JetStreamTimestampEpochNS} {
		if r.Values[f] != nil {
			t.Errorf("%v = %v, want NULL", f, r.Values[f])
		}
	}
	if r.Values[Headers] != "{}" || r.Values[MessageID] != "m1" {
		t.Errorf("headers %v, message_id %v; want {} and m1", r.Values[Headers], r.Values[MessageID])
	}
}

func TestBuildRowFailures(t *testing.T) {
	for _, tt := range []struct {
		name     string
		js       string
		mutate   func(e *sink.Envelope)
		wantType string
		wantText string
	}{
		{"no stream for stream_sequence", `{}`, func(e *sink.Envelope) { e.Stream = "" }, sink.ValidationError, "stream_sequence idempotency requires JetStream stream and sequence metadata"},
		{"no message id", `{"idempotency":{"strategy":"message_id"}}`, func(e *sink.Envelope) { e.MessageID = "" }, sink.ValidationError, "message_id idempotency requires a message id header"},
		{"json_only with text", `{"payload_mode":"json_only"}`, func(e *sink.Envelope) { e.Data = []byte("text") }, sink.SerializationError, "is not valid JSON"},
		{"payload field missing", `{"idempotency":{"strategy":"payload_field","payload_field":"nope"}}`, nil, sink.ValidationError, `payload field "nope" not found`},
		{"creation time beyond int64", `{}`, func(e *sink.Envelope) { e.Headers = sink.Headers{"Nats-Time-Stamp": "2300-01-01"} }, sink.PermanentSinkError, "outside the 64-bit epoch-ns range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := compile(t, SQLite, tt.js)
			e := shapestest.Golden()
			if tt.mutate != nil {
				tt.mutate(e)
			}
			_, err := m.BuildRow(e, shapestest.Stored)
			res := sink.Failed(err)
			if res.Outcome != sink.Permanent || res.ErrorType != tt.wantType || err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("BuildRow error = %v (%v %s), want Permanent %s containing %q", err, res.Outcome, res.ErrorType, tt.wantType, tt.wantText)
			}
		})
	}
}

func TestPayloadFieldValue(t *testing.T) {
	for _, tt := range []struct {
		payload string
		path    string
		want    string
		err     string
	}{
		{`{"id":"O-1"}`, "id", "O-1", ""},
		{`{"a":{"b":{"c":"  x  "}}}`, "a.b.c", "x", ""},
		{`{"n":12345678901234567890123}`, "n", "12345678901234567890123", ""},
		{`{"n":-0}`, "n", "0", ""},
		{`{"f":42.50}`, "f", "42.5", ""},
		{`{"f":1e16}`, "f", "1e+16", ""},
		{`{"f":100.0}`, "f", "100.0", ""},
		{`{"f":0.00001}`, "f", "1e-05", ""},
		{`{"t":true}`, "t", "True", ""},
		{`{"t":false}`, "t", "False", ""},
		{`{"s":"\u2003x\u001f"}`, "s", "x", ""},
		{`{"a":null}`, "a", "", `payload field "a" is null`},
		{`{"a":{}}`, "a", "", `payload field "a" is not a scalar (got object)`},
		{`{"a":[1]}`, "a", "", `payload field "a" is not a scalar (got array)`},
		{`{"a":"   "}`, "a", "", `payload field "a" is blank`},
		{`{"a":1}`, "b", "", `payload field "b" not found`},
		{`{"a":[{"b":1}]}`, "a.b", "", `payload field "a.b" not found: the payload is not an object at "b"`},
		{`"text"`, "a", "", `payload field "a" not found: the payload is not an object at "a"`},
	} {
		v, err := jsonx.Parse([]byte(tt.payload))
		if err != nil {
			t.Fatal(err)
		}
		got, err := PayloadFieldValue(v, strings.Split(tt.path, "."))
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.err {
			t.Errorf("PayloadFieldValue(%s, %s) = %q, %q; want %q, %q", tt.payload, tt.path, got, gotErr, tt.want, tt.err)
		}
	}
}

func TestPayloadFieldRow(t *testing.T) {
	m := compile(t, SQLite, `{"idempotency":{"strategy":"payload_field","payload_field":"order_id"}}`)
	e := shapestest.Golden()
	e.MessageID = "ignored"
	r, err := m.BuildRow(e, shapestest.Stored)
	if err != nil {
		t.Fatal(err)
	}
	if r.Values[MessageID] != "O-1001" {
		t.Errorf("message_id = %v, want the payload field O-1001", r.Values[MessageID])
	}
}

func TestDDL(t *testing.T) {
	for _, tt := range []struct {
		d    Dialect
		js   string
		file string
	}{
		{SQLite, `{}`, "ddl_sqlite.sql"},
		{Postgres, `{}`, "ddl_postgres.sql"},
		{MySQL, `{}`, "ddl_mysql.sql"},
		{Oracle, `{"mode":"merge"}`, "ddl_oracle.sql"},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			m := compile(t, tt.d, tt.js)
			if diff := cmp.Diff(strings.TrimSuffix(string(want), "\n"), m.DDL(m.Tables[0])); diff != "" {
				t.Errorf("DDL (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDDLVariants(t *testing.T) {
	m := compile(t, SQLite, `{"table":"main.events","idempotency":{"strategy":"message_id"}}`)
	ddl := m.DDL(m.Tables[0])
	for _, want := range []string{
		`create table if not exists "main"."events" (`,
		`    constraint "events_pk" primary key ("stream_name", "stream_sequence"),` + "\n" + `    constraint "events_idem" unique ("message_id")` + "\n)",
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %q:\n%s", want, ddl)
		}
	}
	long := strings.Repeat("T", 62)
	mm := compile(t, MySQL, `{"table":"db.`+long+`"}`)
	if want := "constraint `" + long[:55] + "_"; !strings.Contains(mm.DDL(mm.Tables[0]), want) {
		t.Errorf("MySQL long constraint name: want prefix %q in\n%s", want, mm.DDL(mm.Tables[0]))
	}
	if got := mysqlConstraint(long); len(got) != 64 {
		t.Errorf("mysqlConstraint length = %d, want 64", len(got))
	}
	om := compile(t, Oracle, `{"mode":"merge"}`)
	st := om.StagingDDL("STAGE", "NATS_SINKS_BATCH_ID")
	if !strings.HasPrefix(st, "create table STAGE (\n    nats_sinks_batch_id varchar2(64) not null,\n    stream_name ") || strings.Contains(st, "primary key") {
		t.Errorf("staging DDL:\n%s", st)
	}
}

func TestReduce(t *testing.T) {
	tb := &Table{Key: []Field{StreamName, StreamSequence}, Update: []Field{Payload}}
	row := func(i int, seq any) *Row {
		r := &Row{Index: i, Table: tb}
		r.Values[StreamName], r.Values[StreamSequence] = "S", seq
		return r
	}
	rows := []*Row{row(0, int64(1)), row(1, int64(2)), row(2, int64(1)), row(3, nil), row(4, nil)}
	idx := func(rs []*Row) []int {
		var out []int
		for _, r := range rs {
			out = append(out, r.Index)
		}
		return out
	}
	for _, tt := range []struct {
		mode          Mode
		update        []Field
		kept, dropped []int
	}{
		{Upsert, []Field{Payload}, []int{1, 2, 3, 4}, []int{0}},
		{Upsert, nil, []int{0, 1, 3, 4}, []int{2}},
		{InsertIgnore, nil, []int{0, 1, 3, 4}, []int{2}},
		{Insert, nil, []int{0, 1, 2, 3, 4}, nil},
	} {
		tb.Update = tt.update
		kept, dropped := Group{Table: tb, Rows: rows}.Reduce(tt.mode)
		if !cmp.Equal(idx(kept), tt.kept) || !cmp.Equal(idx(dropped), tt.dropped) {
			t.Errorf("Reduce(%s, update %v) = %v, %v; want %v, %v", tt.mode, tt.update, idx(kept), idx(dropped), tt.kept, tt.dropped)
		}
	}
}

func TestGroupRows(t *testing.T) {
	a, b := &Table{Name: "a"}, &Table{Name: "b"}
	rows := []*Row{{Index: 0, Table: b}, {Index: 1, Table: a}, {Index: 2, Table: b}}
	g := GroupRows(rows)
	if len(g) != 2 || g[0].Table != b || len(g[0].Rows) != 2 || g[0].Rows[1].Index != 2 || g[1].Table != a {
		t.Errorf("GroupRows = %+v", g)
	}
}

// fakeTx records calls and fails where told.
type fakeTx struct {
	execErr, commitErr error
	affected           int64
	calls              []string
	dupIndex           int
}

func (f *fakeTx) Exec(ctx context.Context, g Group) (int64, error) {
	f.calls = append(f.calls, "exec "+g.Table.Name)
	for _, r := range g.Rows {
		if r.Index == f.dupIndex {
			r.Duplicate = true
		}
	}
	return f.affected, f.execErr
}
func (f *fakeTx) Commit(context.Context) error {
	f.calls = append(f.calls, "commit")
	return f.commitErr
}
func (f *fakeTx) Rollback() error { f.calls = append(f.calls, "rollback"); return nil }

func TestWriter(t *testing.T) {
	errDB := errors.New("db says no")
	noStream := shapestest.Golden()
	noStream.Stream = ""
	for _, tt := range []struct {
		name      string
		tx        fakeTx
		classify  func(error) error
		want      []sink.Result
		wantCalls []string
		wantDups  int
	}{
		{"commit", fakeTx{affected: 1, dupIndex: 2}, nil,
			[]sink.Result{sink.Ok, {Outcome: sink.Permanent, ErrorType: sink.ValidationError}, {Outcome: sink.Duplicate}},
			[]string{"exec nats_sink_events", "commit"}, 1},
		{"exec error classified permanent, shared", fakeTx{execErr: errDB, dupIndex: -1}, sink.AsPermanent,
			[]sink.Result{{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Shared: true}, {Outcome: sink.Permanent, ErrorType: sink.ValidationError}, {Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Shared: true}},
			[]string{"exec nats_sink_events", "rollback"}, 0},
		{"exec error classified destination", fakeTx{execErr: errDB, dupIndex: -1}, sink.AsDestination,
			[]sink.Result{{Outcome: sink.Destination, Shared: true}, {Outcome: sink.Permanent, ErrorType: sink.ValidationError}, {Outcome: sink.Destination, Shared: true}},
			[]string{"exec nats_sink_events", "rollback"}, 0},
		{"commit error is temporary", fakeTx{commitErr: errDB, affected: 2, dupIndex: -1}, sink.AsPermanent,
			[]sink.Result{{Outcome: sink.Temporary, Shared: true}, {Outcome: sink.Permanent, ErrorType: sink.ValidationError}, {Outcome: sink.Temporary, Shared: true}},
			[]string{"exec nats_sink_events", "commit"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := compile(t, SQLite, `{}`)
			tx := tt.tx
			var stats []Stats
			w := Writer{Model: m, Begin: func(context.Context) (Tx, error) { return &tx, nil },
				Classify: tt.classify, Now: func() time.Time { return shapestest.Stored },
				Observe: func(s Stats) { stats = append(stats, s) }}
			e2 := shapestest.Golden()
			e2.StreamSequence = 43
			got := w.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden(), noStream, e2})
			for i := range got {
				if got[i].Outcome != sink.Committed && got[i].Outcome != sink.Duplicate && got[i].Err == nil {
					t.Errorf("result %d has no error", i)
				}
				got[i].Err = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, tx.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if tt.wantDups > 0 && (len(stats) != 1 || stats[0].Duplicates != tt.wantDups || stats[0].Rows != 2) {
				t.Errorf("stats = %+v, want 2 rows, %d duplicates", stats, tt.wantDups)
			}
		})
	}
}

func TestWriterCancelled(t *testing.T) {
	m := compile(t, SQLite, `{}`)
	began := false
	w := Writer{Model: m, Begin: func(context.Context) (Tx, error) { began = true; return &fakeTx{}, nil }, Classify: sink.AsPermanent}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rs := w.WriteBatch(ctx, []*sink.Envelope{shapestest.Golden()})
	if rs[0].Outcome != sink.Temporary || !rs[0].Shared || began {
		t.Errorf("cancelled WriteBatch = %+v (began %v), want Shared Temporary without a transaction", rs[0], began)
	}
}
