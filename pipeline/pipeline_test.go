package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/natstest"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// TestOptionsEnvReachesTheSink checks that a library caller's Env, not the
// process environment, resolves the sink's *_env keys: with the variable only
// in Options.Env the pipeline starts; without it, start-up fails with a
// configuration error naming the variable.
func TestOptionsEnvReachesTheSink(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}})
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "HOOKS", "consumer": "hooks-http", "subject": "hooks.>"},
  "sink": {"type": "http", "url": "http://127.0.0.1:9/hook", "allow_http_for_local_testing": true,
           "headers_env": {"Authorization": "NATS_SINK_TEST_ONLY_IN_OPTIONS"}}
}`, s.ClientURL())
	env := func(name string) (string, bool) {
		if name == "NATS_SINK_TEST_ONLY_IN_OPTIONS" {
			return "Bearer x", true
		}
		return "", false
	}
	cfg, err := config.Parse([]byte(doc), "test.json", builtin.Registry(), env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p, err := pipeline.Start(ctx, cfg, pipeline.Options{Env: env})
	if err != nil {
		t.Fatalf("Start with the variable in Options.Env: %v", err)
	}
	p.Close(time.Second)

	_, err = pipeline.Start(ctx, cfg, pipeline.Options{Env: func(string) (string, bool) { return "", false }})
	if err == nil || !errors.Is(err, sink.ErrConfig) {
		t.Fatalf("Start without the variable = %v, want a configuration error", err)
	}
	if want := "NATS_SINK_TEST_ONLY_IN_OPTIONS"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}
