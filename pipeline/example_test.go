package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// Run the whole connector from a configuration file inside your own program:
// load it with the built-in sinks, start the pipeline, run until the context
// ends, close. Here the file sink writes one JSON file per message.
func Example() {
	// A JetStream server and a stream with three messages; in production
	// these already exist.
	url, stop := startServer()
	defer stop()
	publish(url, "ORDERS", "orders.>", "orders.created", 3)

	dir, _ := os.MkdirTemp("", "pipeline-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "nats-sink.json")
	os.WriteFile(path, []byte(`{
  "nats": {"url": "`+url+`", "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.>"},
  "sink": {"type": "file", "directory": "`+filepath.Join(dir, "events")+`"}
}`), 0o600)

	cfg, err := config.Load(path, builtin.Registry(), nil)
	if err != nil {
		fmt.Println(err) // every problem, each with its JSON path
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := pipeline.Start(ctx, cfg, pipeline.Options{
		Logger:     slog.New(slog.DiscardHandler), // your logger
		Registerer: prometheus.NewRegistry(),      // your registry (used when metrics.enabled)
	})
	if err != nil {
		fmt.Println("start:", err, "config error:", errors.Is(err, sink.ErrConfig))
		return
	}
	defer p.Close(5 * time.Second)

	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitForFiles(filepath.Join(dir, "events"), 3)
	cancel() // like SIGTERM: in-flight batches finish, then Run returns
	fmt.Println("run ended:", <-done)
	fmt.Println("acknowledged:", p.Metrics().MessagesAcked.Value())
	// Output:
	// run ended: <nil>
	// acknowledged: 3
}

// startServer runs an in-process JetStream server on a free port.
func startServer() (url string, stop func()) {
	dir, _ := os.MkdirTemp("", "pipeline-example-js-")
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	return s.ClientURL(), func() { s.Shutdown(); s.WaitForShutdown(); os.RemoveAll(dir) }
}

// publish creates stream (if needed) and stores n messages on subject.
func publish(url, stream, filter, subject string, n int) {
	nc, err := nats.Connect(url)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{filter}}); err != nil {
		panic(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, subject, fmt.Appendf(nil, `{"order":%d}`, i)); err != nil {
			panic(err)
		}
	}
}

// waitForFiles waits until dir holds n regular files (the file sink writes
// one per message, under subject directories).
func waitForFiles(dir string, n int) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		count := 0
		filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				count++
			}
			return nil
		})
		if count >= n {
			return
		}
	}
}
