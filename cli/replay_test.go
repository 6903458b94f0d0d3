package cli

import (
	"testing"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

func TestProgressLine(t *testing.T) {
	for _, tt := range []struct {
		done, total int
		rate        float64
		paused      bool
		want        string
	}{
		{50210, 100000, 4120, false, "ORDERS [##########----------]  50.2%  50,210/100,000  4,120 msg/s  ETA 0:00:12"},
		{0, 100000, 0, false, "ORDERS [--------------------]   0.0%  0/100,000  0 msg/s  ETA -:--:--"},
		{100000, 100000, 9000, false, "ORDERS [####################] 100.0%  100,000/100,000  9,000 msg/s  ETA 0:00:00"},
		{10, 4000000, 1, false, "ORDERS [--------------------]   0.0%  10/4,000,000  1 msg/s  ETA 1111:06:30"},
		{500, 1000, 3, true, "ORDERS [##########----------]  50.0%  500/1,000  3 msg/s  paused: sink unhealthy"},
		{5, -1, 2, false, "ORDERS [--------------------]   0.0%  5/?  2 msg/s  ETA -:--:--"},
	} {
		if got := progressLine("ORDERS", tt.done, tt.total, tt.rate, tt.paused); got != tt.want {
			t.Errorf("progressLine(%d, %d, %v, %v) =\n%q, want\n%q", tt.done, tt.total, tt.rate, tt.paused, got, tt.want)
		}
	}
}

func TestDuplicateModel(t *testing.T) {
	for _, tt := range []struct {
		sink    string
		absorbs bool
	}{
		{`{"type": "file", "directory": "d"}`, true},
		{`{"type": "file", "directory": "d", "duplicate_policy": "fail"}`, false},
		{`{"type": "file", "directory": "d", "duplicate_policy": "overwrite"}`, true},
		{`{"type": "sqlite", "path": "x.db", "mode": "insert"}`, false},
		{`{"type": "sqlite", "path": "x.db"}`, true},
		{`{"type": "postgres", "host": "h", "database": "d", "user": "u", "password": "p", "mode": "insert"}`, false},
		{`{"type": "postgres", "host": "h", "database": "d", "user": "u", "password": "p", "mode": "insert_ignore"}`, true},
		{`{"type": "mysql", "host": "h", "database": "d", "user": "u", "password": "p", "mode": "append"}`, false},
		{`{"type": "s3", "bucket": "audit-bucket", "duplicate_policy": "fail_existing"}`, false},
		{`{"type": "s3", "bucket": "audit-bucket"}`, true},
		{`{"type": "spool", "directory": "d", "allow_unencrypted": true, "duplicate_policy": "fail"}`, false},
		{`{"type": "http", "url": "https://example.com/hook"}`, true},
	} {
		doc := `{"nats": {"stream": "S", "consumer": "c", "subject": "s.>"}, "sink": ` + tt.sink + `}`
		cfg, err := config.Parse([]byte(doc), "t.json", builtin.Registry(), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Errorf("%s: %v", tt.sink, err)
			continue
		}
		if model, absorbs := duplicateModel(cfg); absorbs != tt.absorbs {
			t.Errorf("duplicateModel(%s) = %q, %v; want absorbs %v", tt.sink, model, absorbs, tt.absorbs)
		}
	}
}
