package sqlmodel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// BenchmarkBuildRow is the Go cost of one SQL row: payload normalisation
// and the three JSON documents, for a 256-byte JSON payload as in
// `nats-sink bench`.
func BenchmarkBuildRow(b *testing.B) {
	sh := DefaultShared[sqlconfig.UpsertRoute](Postgres)
	m, err := Compile(&sh, Postgres, Options{Mode: Upsert})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"n":1000000001,"pad":"` + strings.Repeat("x", 256-len(`{"n":1000000000,"pad":""}`)) + `"}`
	envs := make([]*sink.Envelope, 1000)
	for i := range envs {
		envs[i] = intake.Build(intake.Message{
			Subject: "bench.x",
			Reply:   fmt.Sprintf("$JS.ACK.B.c.1.%d.%d.1780048800123456000.0", i+1, i+1),
			Data:    []byte(body),
		}, nil, shapestest.Received)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := m.BuildRow(envs[i%len(envs)], shapestest.Stored); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
