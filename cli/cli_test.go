package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
			"exits":      cmdExits,
			"waitacked":  cmdWaitAcked,
			"msgs":       cmdMsgs,
			"consumers":  cmdConsumers,
			"readyz":     cmdReadyz,
			"waitlines":  cmdWaitLines,
		},
	})
}

// natsserver [-max_payload N] starts an embedded JetStream server for the
// script, sets $NATS_URL (and $NATS_ADDR, its host:port) and stops the
// server when the script ends.
func cmdNATSServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 && (len(args) != 2 || args[0] != "-max_payload") {
		ts.Fatalf("usage: natsserver [-max_payload N]")
	}
	dir, err := os.MkdirTemp(ts.Getenv("WORK"), "nats-store-")
	ts.Check(err)
	var s *server.Server
	if len(args) == 0 {
		s, err = natstest.Start(dir)
	} else {
		mp, perr := strconv.Atoi(args[1])
		ts.Check(perr)
		s, err = natstest.StartConf(fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\nmax_payload: %d\n", dir, mp))
	}
	ts.Check(err)
	ts.Defer(s.Shutdown)
	ts.Setenv("NATS_URL", s.ClientURL())
	ts.Setenv("NATS_ADDR", s.Addr().String()) // an address in use
}

// exits CODE PROG [ARGS...] runs PROG like exec and asserts its exit code
// exactly. `! exec` only says "not 0", and a configuration error (2) must
// not pass for a runtime error (1) or the other way round.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	var ee *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case err == nil:
	case errors.As(err, &ee):
		got = ee.ExitCode()
	default:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// waitlines FILE REGEXP N waits up to a minute until N lines of FILE match
// REGEXP: a background command's progress, for a signal that must come
// after it (its stdout is only readable after wait).
func cmdWaitLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitlines FILE REGEXP N")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	want, err := strconv.Atoi(args[2])
	ts.Check(err)
	got := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, _ := os.ReadFile(ts.MkAbs(args[0]))
		if got = len(re.FindAll(data, -1)); got >= want {
			return
		}
	}
	ts.Fatalf("%s: %d lines match %q after a minute, want %d", args[0], got, args[1], want)
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
// publish SUBJECT -body TEXT [ID] publishes one message with that body and
// no id (or Nats-Msg-Id ID).
func cmdPublish(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 4 || args[1] != "-body" && len(args) != 2 {
		ts.Fatalf("usage: publish SUBJECT N | publish SUBJECT -body TEXT [ID]")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if args[1] == "-body" {
		var opts []jetstream.PublishOpt
		if len(args) == 4 {
			opts = append(opts, jetstream.WithMsgID(args[3]))
		}
		_, err := js.Publish(ctx, args[0], []byte(args[2]), opts...)
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

// consumer STREAM NAME ACKFLOOR PENDING waits up to 10 s for the consumer's
// ack floor (stream sequence) and number of ack-pending messages to be
// these. Plain ACKs are fire-and-forget: a file on disk says the write
// committed, not that the server has applied the ACK yet.
func cmdConsumer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: consumer STREAM NAME ACKFLOOR ACKPENDING")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	want := args[2] + " " + args[3]
	var got string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := js.Consumer(ctx, args[0], args[1])
		var info *jetstream.ConsumerInfo
		if err == nil {
			info, err = c.Info(ctx)
		}
		cancel()
		ts.Check(err)
		if got = fmt.Sprintf("%d %d", info.AckFloor.Stream, info.NumAckPending); got == want {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("consumer %s/%s ack floor and ack pending = %s after 10s, want %s", args[0], args[1], got, want)
		}
	}
}

// waitacked STREAM NAME N waits (up to 30 s) until the consumer's ack
// floor reaches stream sequence N with nothing ack-pending: ACKs are
// fire-and-forget, so a check right after the sink wrote would race them.
func cmdWaitAcked(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitacked STREAM NAME N")
	}
	want, err := strconv.ParseUint(args[2], 10, 64)
	ts.Check(err)
	nc, js := jetStream(ts)
	defer nc.Close()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := js.Consumer(ctx, args[0], args[1])
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = c.Info(ctx); err == nil {
				if info.AckFloor.Stream >= want && info.NumAckPending == 0 {
					cancel()
					return
				}
				last = fmt.Sprintf("ack floor %d, ack pending %d", info.AckFloor.Stream, info.NumAckPending)
			}
		}
		cancel()
		if err != nil {
			last = err.Error()
		}
	}
	ts.Fatalf("consumer %s/%s: %s after 30s, want ack floor %d and nothing pending", args[0], args[1], last, want)
}

// msgs STREAM SUBJECT N asserts that stream holds N messages on subject
// (a literal subject or a pattern), and, with -consumers K as extra
// arguments, that it has K consumers.
func cmdMsgs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 && len(args) != 5 {
		ts.Fatalf("usage: msgs STREAM SUBJECT N [-consumers K]")
	}
	nc, js := jetStream(ts)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, args[0])
	ts.Check(err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(args[1]))
	ts.Check(err)
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	if got := strconv.FormatUint(n, 10); got != args[2] {
		ts.Fatalf("stream %s holds %s messages on %s, want %s", args[0], got, args[1], args[2])
	}
	if len(args) == 5 {
		if got := strconv.Itoa(info.State.Consumers); got != args[4] {
			ts.Fatalf("stream %s has %s consumers, want %s", args[0], got, args[4])
		}
	}
}

// consumers STREAM N waits (up to 30 s) until stream has N consumers.
func cmdConsumers(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: consumers STREAM N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	nc, js := jetStream(ts)
	defer nc.Close()
	got := -1
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := js.Stream(ctx, args[0])
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = st.Info(ctx); err == nil {
				got = info.State.Consumers
			}
		}
		cancel()
		if got == want {
			return
		}
	}
	ts.Fatalf("stream %s has %d consumers after 30s, want %d", args[0], got, want)
}

// readyz CODE STATUS serves /readyz answering CODE with {"status":STATUS}
// (what a run process's endpoint answers), sets $READYZ_ADDR to its
// host:port and stops it when the script ends.
func cmdReadyz(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: readyz CODE STATUS")
	}
	code, err := strconv.Atoi(args[0])
	ts.Check(err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"checks":{},"status":%q}`+"\n", args[1])
	}))
	ts.Defer(srv.Close)
	ts.Setenv("READYZ_ADDR", srv.Listener.Addr().String())
}
