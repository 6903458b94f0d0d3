package httpsink

import (
	"testing"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// TestSchemaAndEffective checks that the generic schema generator and the
// effective-config renderer accept the Config's types (maps, nested
// objects, float keys) and describe every key.
func TestSchemaAndEffective(t *testing.T) {
	c := Default()
	s := fields.Schema(&c)
	props, _ := s["properties"].(map[string]any)
	for _, key := range []string{"url", "headers", "headers_env", "idempotency", "retry", "concurrency", "success_statuses"} {
		if _, ok := props[key]; !ok {
			t.Errorf("schema lacks property %q", key)
		}
	}
	eff := fields.Effective(&c)
	if got := string(jsonx.Marshal(eff["retry"], jsonx.UTF8)); got != `{"backoff_mode":"exponential","backoff_ms":250,"backoff_multiplier":2.0,"jitter":"full","max_backoff_ms":5000,"max_retries":0}` {
		t.Errorf("effective retry = %s", got)
	}
}
