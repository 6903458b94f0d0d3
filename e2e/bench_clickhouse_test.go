package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/clickhousetest"
)

// TestBenchClickHouse measures the clickhouse sink writing small mapped rows
// (three mapped columns, the two key columns and the version) into a private
// ClickHouse server on this machine, at batch 5,000 and 1,000 and 2 and 4
// batches in flight, as a ratio of the same run's consume+ACK ceiling. The
// server shares the two cores with the binary: its CPU per row comes from
// /proc/<pid>/stat before and after each run (it is busy only in the
// clickhouse phase).
func TestBenchClickHouse(t *testing.T) {
	scale := benchSkip(t)
	n := int(100000 * scale)
	srv := clickhousetest.Run(t)
	type conf struct{ batch, inFlight int }
	confs := []conf{{5000, 2}, {5000, 4}, {1000, 2}, {1000, 4}}
	got := series{}
	var mapping []any
	for _, m := range []map[string]any{
		{"column": "i", "path": "/i", "type": "bigint", "required": true},
		{"column": "subject", "path": "$subject", "type": "text"},
		{"column": "received", "path": "$received_at", "type": "timestamp"},
	} {
		mapping = append(mapping, m)
	}
	for run := 1; run <= benchRuns(t); run++ {
		for _, c := range confs {
			name := fmt.Sprintf("clickhouse batch %d in-flight %d", c.batch, c.inFlight)
			t.Run(fmt.Sprintf("batch-%d-inflight-%d/%d", c.batch, c.inFlight, run), func(t *testing.T) {
				table := fmt.Sprintf("bench_%d_%d_%d", c.batch, c.inFlight, run)
				cfg := benchConfig(t, map[string]any{
					"type": "clickhouse", "url": srv.URL, "table": table, "auto_create": true,
					"layout": "mapped", "mapping": mapping,
				}, map[string]any{"batch_size": c.batch, "max_in_flight_batches": c.inFlight, "batch_timeout_ms": 500})
				before, err := cpuTime(srv.Pid())
				if err != nil {
					t.Fatal(err)
				}
				r := runBench(t, cfg, n, nil, "null", "clickhouse")
				after, err := cpuTime(srv.Pid())
				if err != nil {
					t.Fatal(err)
				}
				if stored := strings.TrimSpace(srv.MustQuery(t, "SELECT count() FROM `"+table+"` FINAL")); stored != strconv.Itoa(n) {
					t.Errorf("table holds %s rows after a clean run of %d messages", stored, n)
				}
				got.add(t, r, name, "pipeline (clickhouse)")
				cpu := (after - before).Seconds()
				us := cpu / float64(n) * 1e6
				cores := cpu / r.seconds(t, "pipeline (clickhouse)")
				got["clickhouse µs/row "+name] = append(got["clickhouse µs/row "+name], us)
				got["clickhouse cores "+name] = append(got["clickhouse cores "+name], cores)
				t.Logf("%s: ClickHouse used %.2f s CPU: %.2f µs per row, %.2f cores over the phase", name, cpu, us, cores)
				srv.MustQuery(t, "DROP TABLE `"+table+"`")
			})
		}
	}
	t.Logf("%d messages per run", n)
	var keys []string
	for _, c := range confs {
		name := fmt.Sprintf("clickhouse batch %d in-flight %d", c.batch, c.inFlight)
		keys = append(keys, slices.Concat(names(name), []string{"clickhouse µs/row " + name, "clickhouse cores " + name})...)
	}
	got.report(t, keys...)
}
