package pipeline

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

func TestFanoutAckWaitWarning(t *testing.T) {
	doc := func(timeout int, inProgress bool) []byte {
		ip := "false"
		if inProgress {
			ip = "true"
		}
		return []byte(`{"nats": {"url": "nats://127.0.0.1:4222", "stream": "S", "consumer": "c", "subject": "s.>"},
 "consumer_management": {"ack_wait_seconds": 30},
 "delivery": {"in_progress": {"enabled": ` + ip + `}},
 "sinks": {"db": {"type": "file", "directory": "a"}, "side": {"type": "file", "directory": "b"}},
 "routing": {"enabled": true, "routes": [{"name": "r", "match": {"subject": "s.>"},
   "targets": ["db", {"sink": "side", "required": false, "minimum_wait_ms": 100, "timeout_ms": ` + strconv.Itoa(timeout) + `}]}]},
 "sink": {"type": "fanout"}}`)
	}
	info := &jetstream.ConsumerInfo{Config: jetstream.ConsumerConfig{AckWait: 30 * time.Second}}
	for _, tt := range []struct {
		name       string
		timeout    int
		inProgress bool
		want       string
	}{
		{"below 80 %", 23999, false, ""},
		{"at 80 %", 24000, false, "routing: optional target timeout_ms 24000 approaches the consumer AckWait of 30 s; enable delivery.in_progress or lower it"},
		{"in_progress on", 29000, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse(doc(tt.timeout, tt.inProgress), "t.json", builtin.Registry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := fanoutAckWaitWarning(cfg, info); got != tt.want {
				t.Errorf("fanoutAckWaitWarning = %q, want %q", got, tt.want)
			}
		})
	}
}
