package cli_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/nats-sinks/nats-sink/cli"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"nats-sink": func() { os.Exit(cli.Main()) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		UpdateScripts:       os.Getenv("NATS_SINK_UPDATE") != "",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"natsserver": cmdNATSServer,
			"publish":    cmdPublish,
			"stream":     cmdStream,
			"consumer":   cmdConsumer,
		},
	})
}

// natsserver starts an embedded JetStream server for the script, sets
// $NATS_URL and stops the server when the script ends.
func cmdNATSServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: natsserver")
	}
	dir, err := os.MkdirTemp(ts.Getenv("WORK"), "nats-store-")
	ts.Check(err)
	s, err := natstest.Start(dir)
	ts.Check(err)
	ts.Defer(s.Shutdown)
	ts.Setenv("NATS_URL", s.ClientURL())
}

func jetStream(ts *testscript.TestScript) (*nats.Conn, jetstream.JetStream) {
	nc, err := nats.Connect(ts.Getenv("NATS_URL"))
	ts.Check(err)
	js, err := jetstream.New(nc)
	ts.Check(err)
	return nc, js
}

// stream NAME SUBJECT creates a stream.
func cmdStream(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: stream NAME SUBJECT")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: args[0], Subjects: []string{args[1]}})
	ts.Check(err)
}

// publish SUBJECT N publishes N JSON messages {"n":i} with Nats-Msg-Id m-i;
// publish SUBJECT -body TEXT publishes one message with that body and no id.
func cmdPublish(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 && len(args) != 3 {
		ts.Fatalf("usage: publish SUBJECT N | publish SUBJECT -body TEXT")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if args[1] == "-body" {
		_, err := js.Publish(ctx, args[0], []byte(args[2]))
		ts.Check(err)
		return
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	for i := 1; i <= n; i++ {
		_, err := js.Publish(ctx, args[0], fmt.Appendf(nil, `{"n":%d}`, i), jetstream.WithMsgID(fmt.Sprintf("m-%d", i)))
		ts.Check(err)
	}
}

// consumer STREAM NAME ACKFLOOR PENDING asserts the consumer's ack floor
// (stream sequence) and its number of ack-pending messages.
func cmdConsumer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: consumer STREAM NAME ACKFLOOR ACKPENDING")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, args[0], args[1])
	ts.Check(err)
	info, err := c.Info(ctx)
	ts.Check(err)
	got := fmt.Sprintf("%d %d", info.AckFloor.Stream, info.NumAckPending)
	if want := args[2] + " " + args[3]; got != want {
		ts.Fatalf("consumer %s/%s ack floor and ack pending = %s, want %s", args[0], args[1], got, want)
	}
}
