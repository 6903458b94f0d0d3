package custody

import (
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
)

// TestBrokerPlacement: the Redis, RabbitMQ and MQTT envelope records carry
// the custody document at the top level only (their metadata has none),
// and it verifies from the published body alone; payload-only and raw
// bodies carry no custody (docs/formats.md#custody-document).
func TestBrokerPlacement(t *testing.T) {
	e := shapestest.Golden()
	c, err := c1.Compute(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Custody = c
	doc := string(jsonx.Marshal(record.Custody(c), jsonx.UTF8))
	for _, typ := range []string{"redis", "rabbitmq", "mqtt"} {
		t.Run(typ, func(t *testing.T) {
			o := brokerconfig.DefaultOptions("envelope")
			o.RecordFormat, o.IncludeMetadata = "envelope", true
			r, err := broker.Build(&o, typ, e, shapestest.Stored)
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonx.Parse(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			body := v.(map[string]any)
			if got := string(jsonx.Marshal(body["custody"], jsonx.UTF8)); got != doc {
				t.Errorf("custody = %s, want %s", got, doc)
			}
			meta, ok := body["metadata"].(map[string]any)
			if !ok {
				t.Fatalf("no metadata object in %s", r.Body)
			}
			if _, has := meta["custody"]; has {
				t.Errorf("metadata carries custody: %s", r.Body)
			}
			if ver := VerifyFileRecord(r.Body); ver.Err != nil || !ver.HasCustody || len(ver.Mismatches) > 0 || ver.RecordHash != c.RecordHash {
				t.Errorf("verification of the published body = %+v", ver)
			}
			for _, format := range []string{"payload", "raw"} {
				o := brokerconfig.DefaultOptions(format)
				o.RecordFormat = format
				r, err := broker.Build(&o, typ, e, shapestest.Stored)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(r.Body), "custody") || strings.Contains(string(r.Body), c.RecordHash) {
					t.Errorf("%s body carries custody: %s", format, r.Body)
				}
			}
		})
	}
}
