package spool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-sinks/nats-sink/internal/spoolfile"
	"github.com/nats-sinks/nats-sink/sink"
)

// ReplayOptions tune a replay. The zero value replays every record, one per
// WriteBatch, and stops at the first failure.
type ReplayOptions struct {
	// MaxRecords replays at most the first MaxRecords planned records;
	// 0 means all.
	MaxRecords int
	// BatchSize is how many consecutive planned records share one
	// WriteBatch (1..1000); 0 means 1.
	BatchSize int
	// Quarantine moves a record the target rejects as Permanent to the
	// quarantine sub-directory and goes on, instead of stopping.
	Quarantine bool
	// Keys are extra record keys by key_id, for records written before a
	// key rotation. Each is 32 bytes.
	Keys map[string][]byte
	// Prepare, when set, is called with each rebuilt envelope before it is
	// written; an error stops the replay at that record. It is the hook
	// for work the runner does at receipt, such as custody.
	Prepare func(*sink.Envelope) error
	// OnQuarantine is told about each quarantined record: its file and the
	// target's result.
	OnQuarantine func(file string, r sink.Result)
}

// Summary counts what a replay did. Scanned is the number of planned
// records; Failed counts the record that stopped the run and every
// quarantined one.
type Summary struct {
	Scanned, Replayed, Deleted, Failed int
}

// A FileError is a replay failure of one spool file: unreadable,
// undecryptable, or not committed by the target. Error reads
// "<file>: <text>".
type FileError struct {
	File string // path of the spool file
	Err  error
}

// Error returns "<file>: <text>".
func (e *FileError) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns the underlying failure.
func (e *FileError) Unwrap() error { return e.Err }

// ErrLocked: another replay-spool holds the spool lock.
var ErrLocked = spoolfile.ErrLocked

// planned is one record of a replay plan.
type planned struct {
	name string
	rank int64
	time int64
}

// A Replay drains a started spool into a target sink, in plan order, at
// least once: a file is deleted only after the target reported its record
// Committed or Duplicate, so a crash at any point leaves every undelivered
// record in the spool and a rerun resumes in the same order. Files written
// after planning wait for the next replay.
type Replay struct {
	st     *store
	unlock func()
	plan   []planned
	opts   ReplayOptions
	now    func() time.Time
}

// StartReplay starts the spool side of a replay: the sink's start rules
// (Validate, directory, record key, stale temp files), the exclusive
// replay lock (ErrLocked while another replay holds it), and the plan: the
// spool files' wrappers read and ordered by drain_ordering. A file that is
// not a wrapper at all stops the replay before anything is sent, as a
// *FileError.
func (c Config) StartReplay(ctx context.Context, deps sink.Deps, o ReplayOptions) (*Replay, error) {
	if o.BatchSize == 0 {
		o.BatchSize = 1
	}
	if o.BatchSize < 1 || o.BatchSize > 1000 || o.MaxRecords < 0 {
		return nil, fmt.Errorf("replay: batch size %d or max records %d out of range: %w", o.BatchSize, o.MaxRecords, sink.ErrConfig)
	}
	for id, k := range o.Keys {
		if len(k) != 32 {
			return nil, fmt.Errorf("replay key %q: must be exactly 32 bytes for AES-256: %w", id, sink.ErrConfig)
		}
	}
	st, err := start(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	unlock, err := st.dir.Lock()
	if err != nil {
		st.dir.Close()
		return nil, err
	}
	r := &Replay{st: st, unlock: unlock, opts: o, now: time.Now}
	if r.plan, err = makePlan(st.dir, c.DrainOrdering, o.MaxRecords); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// DryRun plans a replay without starting anything: it reads the wrappers,
// decrypts nothing, creates, locks and deletes nothing, and returns how many
// records a replay with o would send. A missing directory plans zero.
func (c Config) DryRun(ctx context.Context, o ReplayOptions) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	abs, err := c.ResolvedDirectory()
	if err != nil {
		return 0, configProblem("directory", err.Error())
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("spool directory %s: %w", abs, err)
	case !st.IsDir():
		return 0, configProblem("directory", abs+" exists and is not a directory")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	dir, err := spoolfile.OpenDir(abs)
	if err != nil {
		return 0, fmt.Errorf("open spool directory: %w", err)
	}
	defer dir.Close()
	plan, err := makePlan(dir, c.DrainOrdering, o.MaxRecords)
	return len(plan), err
}

// makePlan lists the spool files, reads each wrapper and orders them:
// priority by (rank, time, name), fifo by (time, name); then keeps the
// first max (0 = all).
func makePlan(dir *spoolfile.Dir, ordering string, maxRecords int) ([]planned, error) {
	entries, err := dir.List()
	if err != nil {
		return nil, fmt.Errorf("list spool directory %s: %w", dir.Path(), err)
	}
	plan := make([]planned, 0, len(entries))
	for _, en := range entries {
		data, err := dir.ReadFile(en.Name)
		if err != nil {
			return nil, &FileError{File: filepath.Join(dir.Path(), en.Name), Err: err}
		}
		w, err := spoolfile.ParseWrapper(en.Name, data)
		if err != nil {
			return nil, &FileError{File: filepath.Join(dir.Path(), en.Name), Err: err}
		}
		plan = append(plan, planned{name: en.Name, rank: w.Rank, time: w.SpooledAtNS})
	}
	slices.SortFunc(plan, func(a, b planned) int {
		if ordering != "fifo" {
			if c := cmp.Compare(a.rank, b.rank); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.time, b.time), cmp.Compare(a.name, b.name))
	})
	if maxRecords > 0 && len(plan) > maxRecords {
		plan = plan[:maxRecords]
	}
	return plan, nil
}

// Directory returns the resolved spool directory.
func (r *Replay) Directory() string { return r.st.dir.Path() }

// Scanned returns the number of planned records.
func (r *Replay) Scanned() int { return len(r.plan) }

// Close releases the lock and the directory.
func (r *Replay) Close() error {
	if r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
	return r.st.dir.Close()
}

// Run replays the plan into target, in order. Per record: read and unwrap
// its file (decrypting with sink.encryption or an extra key), write it, and
// once the target reports it Committed or Duplicate, delete the file when
// delete_after_replay (the directory is fsynced once per batch when fsync
// is on). The first failure stops the run with that file untouched and is
// returned as a *FileError; with Quarantine, Permanent rejections are moved
// aside instead and the run goes on. ctx cancellation stops between
// batches.
func (r *Replay) Run(ctx context.Context, target sink.Sink) (Summary, error) {
	sum := Summary{Scanned: len(r.plan)}
	keys := r.st.keys(r.opts.Keys)
	for start := 0; start < len(r.plan); start += r.opts.BatchSize {
		if err := ctx.Err(); err != nil {
			return sum, fmt.Errorf("replay interrupted: %w", err)
		}
		chunk := r.plan[start:min(start+r.opts.BatchSize, len(r.plan))]
		var (
			envs    []*sink.Envelope
			readErr error
		)
		for _, p := range chunk {
			e, err := r.read(p.name, keys)
			if err != nil {
				readErr = &FileError{File: r.path(p.name), Err: err}
				break
			}
			envs = append(envs, e)
		}
		var stopErr error
		if len(envs) > 0 {
			results := r.write(ctx, target, envs)
			deleted := false
			for k, res := range results {
				name := chunk[k].name
				switch {
				case res.Outcome.Acked():
					sum.Replayed++
					if !r.st.cfg.DeleteAfterReplay {
						continue
					}
					if err := r.st.dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
						if stopErr == nil {
							sum.Failed++
							stopErr = &FileError{File: r.path(name), Err: fmt.Errorf("delivered, but cannot delete the spool file (it will be replayed again): %w", err)}
						}
						continue
					}
					sum.Deleted++
					deleted = true
				case stopErr != nil:
					// The run stops at the first failure; later records
					// the target committed are still deleted above.
				case res.Outcome == sink.Permanent && r.opts.Quarantine:
					sum.Failed++
					if err := r.st.dir.Quarantine(name); err != nil {
						stopErr = &FileError{File: r.path(name), Err: fmt.Errorf("cannot quarantine: %w", err)}
						continue
					}
					if r.opts.OnQuarantine != nil {
						r.opts.OnQuarantine(r.path(name), res)
					}
				default:
					sum.Failed++
					stopErr = &FileError{File: r.path(name), Err: resultError(res)}
				}
			}
			if deleted && r.st.cfg.Fsync {
				if err := r.st.dir.Sync(); err != nil && stopErr == nil {
					stopErr = fmt.Errorf("sync spool directory %s: %w", r.st.dir.Path(), err)
				}
			}
		}
		if stopErr != nil {
			return sum, stopErr
		}
		if readErr != nil {
			sum.Failed++
			return sum, readErr
		}
	}
	return sum, nil
}

// read reads and unwraps one planned file and runs the Prepare hook.
func (r *Replay) read(name string, keys spoolfile.Keys) (*sink.Envelope, error) {
	data, err := r.st.dir.ReadFile(name)
	if err != nil {
		return nil, err
	}
	w, err := spoolfile.ParseWrapper(name, data)
	if err != nil {
		return nil, err
	}
	e, err := w.Envelope(keys, r.now())
	if err != nil {
		return nil, err
	}
	if r.opts.Prepare != nil {
		if err := r.opts.Prepare(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// write writes envs to target. A Shared Permanent result belongs to the
// whole transaction: the records are written again one by one to find the
// one the target really rejects.
func (r *Replay) write(ctx context.Context, target sink.Sink, envs []*sink.Envelope) []sink.Result {
	results := target.WriteBatch(ctx, envs)
	if len(results) != len(envs) {
		// A sink breaking the contract: nothing is known to be durable.
		out := make([]sink.Result, len(envs))
		for i := range out {
			out[i] = sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("target sink returned %d results for %d records", len(results), len(envs))}
		}
		return out
	}
	if len(envs) == 1 {
		return results
	}
	for i, res := range results {
		if res.Outcome == sink.Permanent && res.Shared {
			one := target.WriteBatch(ctx, envs[i:i+1])
			if len(one) == 1 {
				results[i] = one[0]
			} else {
				results[i] = sink.Result{Outcome: sink.Temporary, Err: errors.New("target sink broke the one-result-per-record contract")}
			}
		}
	}
	return results
}

// resultError is the text of a failed result: its error, else its class.
func resultError(res sink.Result) error {
	if res.Err != nil {
		return res.Err
	}
	return fmt.Errorf("target reported %s", res.Outcome)
}

func (r *Replay) path(name string) string { return filepath.Join(r.st.dir.Path(), name) }
