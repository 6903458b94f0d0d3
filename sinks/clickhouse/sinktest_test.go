package clickhouse

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sink/sinktest"
)

// TestConformance runs the sink contract against a real server in both
// layouts. ReadBack reads with FINAL: the engine's duplicate model
// collapses a redelivered row into one.
func TestConformance(t *testing.T) {
	srv := server.Get(t)
	for _, tt := range []struct{ name, extra string }{
		{"audit", `"auto_create":true`},
		{"mapped", `"auto_create":true,"layout":"mapped","include_columns":["stream_name","stream_sequence"],
			"mapping":[{"column":"seq","path":"/seq","type":"bigint"},{"column":"subj","path":"$subject","type":"text"}]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			table := uniqueTable("conf_" + tt.name)
			c := decode(t, sinkJSON(srv.URL, table, tt.extra))
			sinktest.Run(t, sinktest.Harness{
				Open: func(t *testing.T) sink.Sink {
					s, err := c.Open(context.Background(), sink.Deps{})
					if err != nil {
						t.Fatal(err)
					}
					return s
				},
				ReadBack: func(t *testing.T) []sinktest.Stored {
					var out []sinktest.Stored
					for _, r := range rows(t, srv, "SELECT stream_name, stream_sequence FROM `default`.`"+table+"` FINAL") {
						seq, _ := strconv.ParseUint(string(r["stream_sequence"].(json.Number)), 10, 64)
						out = append(out, sinktest.Stored{Stream: r["stream_name"].(string), Sequence: seq})
					}
					return out
				},
				Idempotent: true,
			})
		})
	}
}
