package sqlmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// A Tx is one open transaction on one connection, provided by a dialect for
// one WriteBatch.
type Tx interface {
	// Exec writes every row of g (all for g.Table) and returns the number
	// of rows the database reports as affected, or -1 when it reports
	// none. It may set Row.Duplicate on rows it knows were already present.
	Exec(ctx context.Context, g Group) (affected int64, err error)
	// Commit commits. An error means the outcome is unknown.
	Commit(ctx context.Context) error
	// Rollback rolls back; it is called at most once, after a failure.
	Rollback() error
}

// Stats describes one committed transaction, for a dialect's metrics.
type Stats struct {
	Rows       int           // rows written (after reduction)
	Duplicates int           // attempted − affected (never negative) + rows removed by Reduce
	Deletes    int           // delete statements of the mapped layout (delete_when)
	Exec       time.Duration // time spent in Tx.Exec calls
	Commit     time.Duration // time spent in Tx.Commit
}

// A Writer is the transactional write skeleton (one transaction per batch,
// docs/sql.md#one-transaction-per-batch) that every SQL sink shares. Set the fields before the first WriteBatch; Begin and
// Classify are required.
type Writer struct {
	Model *Model
	// Begin opens a transaction (the dialect chooses the connection and
	// BEGIN form, e.g. SQLite's BEGIN IMMEDIATE).
	Begin func(ctx context.Context) (Tx, error)
	// Classify maps a database error to its class (sinks.md): wrap it with
	// sink.AsPermanent or sink.AsDestination, or return it as it is for
	// Temporary. It sees errors from Begin and Exec, never from Commit.
	Classify func(err error) error
	// Reduce removes rows with repeated keys inside a table group before
	// Exec (see Group.Reduce); PostgreSQL needs it, per-row executors do
	// not.
	Reduce bool
	// Now returns the row build time (stored_at); nil means time.Now.
	Now func() time.Time
	// KeyOrders, when set, chooses the key order of each row's JSON texts
	// (see Model.BuildRowOrdered); nil keeps them canonical.
	KeyOrders KeyOrders
	// Observe, when set, is called after each successful commit.
	Observe func(Stats)
}

// WriteBatch writes batch in one transaction and returns one result per
// envelope:
//
//   - a message whose row cannot be built is Permanent (not Shared) and
//     never reaches the database;
//   - the other rows go into one transaction, grouped per table in
//     first-appearance order; when Begin or Exec fails the transaction is
//     rolled back and every row gets the same classified result with
//     Shared = true (the runner bisects Shared Permanent results);
//   - a commit error is Shared Temporary: the outcome is unknown, and
//     redelivery of a committed row is harmless while a false Committed
//     loses data;
//   - a cancelled ctx rolls back and is Temporary;
//   - after COMMIT, rows are Committed, or Duplicate when the dialect or
//     Reduce knows they were already present.
func (w *Writer) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	now := w.Now
	if now == nil {
		now = time.Now
	}
	var rows []*Row
	for i, e := range batch {
		r, err := w.Model.BuildRowOrdered(e, now(), w.KeyOrders)
		if err != nil {
			results[i] = sink.Failed(err)
			continue
		}
		r.Index = i
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return results
	}
	shared := func(res sink.Result) []sink.Result {
		res.Shared = true
		for _, r := range rows {
			results[r.Index] = res
		}
		return results
	}
	if err := ctx.Err(); err != nil {
		return shared(sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("%s write not started: %w", w.Model.Dialect, err)})
	}

	tx, err := w.Begin(ctx)
	if err != nil {
		return shared(w.failure(ctx, fmt.Errorf("%s begin transaction: %w", w.Model.Dialect, err)))
	}
	var st Stats
	var dropped []*Row
	for _, g := range GroupRows(rows) {
		if w.Reduce {
			var d []*Row
			g.Rows, d = g.Reduce(w.Model.Mode)
			dropped = append(dropped, d...)
		}
		start := time.Now()
		affected, err := tx.Exec(ctx, g)
		st.Exec += time.Since(start)
		if err == nil {
			err = ctx.Err() // a driver may finish a statement after cancellation
		}
		if err != nil {
			_ = tx.Rollback() // the error that matters is err
			return shared(w.failure(ctx, fmt.Errorf("%s write to %s (%d rows): %w", w.Model.Dialect, g.Table.Name, len(g.Rows), err)))
		}
		st.Rows += len(g.Rows)
		if affected >= 0 {
			st.Duplicates += max(0, len(g.Rows)-int(affected))
		}
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return shared(sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("%s write cancelled before commit: %w", w.Model.Dialect, err)})
	}
	start := time.Now()
	if err := tx.Commit(ctx); err != nil {
		return shared(sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("%s commit (outcome unknown): %w", w.Model.Dialect, err)})
	}
	st.Commit = time.Since(start)
	st.Duplicates += len(dropped)
	for _, r := range rows {
		results[r.Index] = sink.Ok
		if r.Delete {
			st.Deletes++
		}
	}
	for _, r := range rows {
		if r.Duplicate {
			results[r.Index] = sink.Result{Outcome: sink.Duplicate}
		}
	}
	for _, r := range dropped {
		results[r.Index] = sink.Result{Outcome: sink.Duplicate}
	}
	if w.Observe != nil {
		w.Observe(st)
	}
	return results
}

// failure classifies err, except that a cancelled or expired ctx is always
// Temporary: the driver's error then says "interrupted", not what is wrong
// with the rows.
func (w *Writer) failure(ctx context.Context, err error) sink.Result {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sink.Result{Outcome: sink.Temporary, Err: err}
	}
	return sink.Failed(w.Classify(err))
}
