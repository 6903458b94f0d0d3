package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Per-phase CPU (docs/performance.md#how-to-reproduce): the bench process's
// own CPU time (the embedded NATS server and an SQLite database included)
// and, for the PostgreSQL and MySQL phases, the CPU time of that server's
// processes on this machine (every process of that name, so other clients
// of the same server count too; exited backends count once their parent has
// reaped them), each divided by the phase's messages.

// cpuSample is one phase's CPU time.
type cpuSample struct {
	self, db time.Duration
	hasDB    bool
}

// cpuMark is a reading at the start of a phase.
type cpuMark struct {
	self, db time.Duration
	comms    []string
}

// dbProcesses returns the process names of the database a phase writes
// to, nil for none outside the bench process.
func (o *benchOptions) dbProcesses(sinkType string) []string {
	switch sinkType {
	case "postgres":
		return []string{"postgres"}
	case "mysql":
		return []string{"mariadbd", "mysqld"}
	}
	return nil
}

func markCPU(comms []string) cpuMark {
	return cpuMark{self: selfCPU(), db: processCPU(comms), comms: comms}
}

// noteCPU records the CPU used since m by phase.
func (o *benchOptions) noteCPU(phase string, m cpuMark) {
	s := cpuSample{self: selfCPU() - m.self}
	if len(m.comms) > 0 {
		s.db, s.hasDB = processCPU(m.comms)-m.db, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cpu == nil {
		o.cpu = map[string][]cpuSample{}
	}
	o.cpu[phase] = append(o.cpu[phase], s)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU sums user and system time, own and of reaped children, of
// every process whose name is one of comms (Linux /proc; 0 elsewhere).
func processCPU(comms []string) time.Duration {
	if len(comms) == 0 {
		return 0
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open || !slices.Contains(comms, string(b[open+1:end])) {
			continue
		}
		f := bytes.Fields(b[end+1:])
		// After the name: state is field 3, utime 14 … cstime 17.
		if len(f) < 15 {
			continue
		}
		for _, x := range f[11:15] {
			n, _ := strconv.ParseInt(string(x), 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// cpuPerMessage returns the median over rounds of phase's CPU per message
// in µs (self, database), ok false when it was not measured.
func (o *benchOptions) cpuPerMessage(phase string, msgs int) (self, db float64, hasDB, ok bool) {
	samples := o.cpu[phase]
	if len(samples) == 0 || msgs <= 0 {
		return 0, 0, false, false
	}
	var s, d []float64
	for _, x := range samples {
		s = append(s, float64(x.self.Microseconds())/float64(msgs))
		d = append(d, float64(x.db.Microseconds())/float64(msgs))
	}
	return median(s), median(d), samples[0].hasDB, true
}
