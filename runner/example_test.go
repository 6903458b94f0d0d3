package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nats-sinks/nats-sink/runner"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/file"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// Run the engine fully in code: a consumer you already have, a built-in sink
// configured in Go, and your own logger and Prometheus registry. No
// configuration file is involved.
func Example() {
	url, stop := startServer()
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js.CreateStream(ctx, jetstream.StreamConfig{Name: "TELEMETRY", Subjects: []string{"telemetry.>"}})
	for i := range 4 {
		js.Publish(ctx, "telemetry.gps", fmt.Appendf(nil, `{"fix":%d}`, i))
	}
	consumer, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{
		Durable: "telemetry-files", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The file sink, configured in Go: one fsync'd JSON file per message.
	dir, _ := os.MkdirTemp("", "runner-example-")
	defer os.RemoveAll(dir)
	fc := file.Default()
	fc.Directory = filepath.Join(dir, "events")
	files, err := fc.Open(ctx, sink.Deps{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer files.Stop(context.Background()) // Run never stops the sink

	registry := prometheus.NewRegistry() // yours: serve it with promhttp
	metrics, err := telemetry.NewMetrics(registry, "nats_sinks")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := &runner.Runner{
		Consumer:    consumer,
		Conn:        nc, // flushes ACKs after each batch
		Sink:        files,
		BatchSize:   100,
		MaxInFlight: 2,
		Metrics:     metrics,
		Logger:      slog.New(slog.DiscardHandler), // yours
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for metrics.MessagesAcked.Value() < 4 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // graceful: in-flight batches finish first
	fmt.Println("run ended:", <-done)
	info, _ := consumer.Info(context.Background())
	fmt.Println("ack floor:", info.AckFloor.Stream, "pending:", info.NumAckPending)
	// Output:
	// run ended: <nil>
	// ack floor: 4 pending: 0
}

// startServer runs an in-process JetStream server on a free port.
func startServer() (url string, stop func()) {
	dir, _ := os.MkdirTemp("", "runner-example-js-")
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
