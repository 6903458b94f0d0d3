package jsapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/jsapi"
	"github.com/nats-sinks/nats-sink/internal/natsconn/natsconntest"
	"github.com/nats-sinks/nats-sink/internal/natstest"
)

func TestPrefix(t *testing.T) {
	d, p := "hub", "$JS.leaf.API."
	for _, tt := range []struct {
		domain, prefix *string
		want           string
	}{
		{nil, nil, "$JS.API"},
		{&d, nil, "$JS.hub.API"},
		{nil, &p, "$JS.leaf.API"},
	} {
		if got := jsapi.Prefix(tt.domain, tt.prefix); got != tt.want {
			t.Errorf("Prefix(%v, %v) = %q, want %q", tt.domain, tt.prefix, got, tt.want)
		}
	}
}

func TestMessages(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}})
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other"}})
	natstest.Publish(t, js, "dlq.a", []byte("one"), nats.Header{"X-Case": {"kept"}})
	natstest.Publish(t, js, "dlq.b", []byte("two"), nil)
	natstest.Publish(t, js, "dlq.a", []byte("three"), nil)
	c := jsapi.New(nc, "$JS.API")
	defer c.Close()
	ctx := t.Context()

	names, err := c.StreamNames(ctx, "dlq.a")
	if err != nil || len(names) != 1 || names[0] != "DLQ" {
		t.Errorf("StreamNames(dlq.a) = %v, %v; want [DLQ]", names, err)
	}
	m, err := c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{Seq: 2, NextBySubject: "dlq.a"})
	if err != nil || m.Seq != 3 || string(m.Data) != "three" {
		t.Fatalf("GetMsg(next dlq.a from 2) = %+v, %v; want seq 3", m, err)
	}
	m, err = c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{Seq: 1})
	if err != nil || m.Header.Get("X-Case") != "kept" || m.Time.IsZero() {
		t.Fatalf("GetMsg(1) = %+v, %v; want the header and a stored time", m, err)
	}
	start := m.Time.Add(time.Nanosecond)
	m, err = c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{StartTime: &start, NextBySubject: "dlq.>"})
	if err != nil || m.Seq != 2 {
		t.Errorf("GetMsg(start time after seq 1) = %+v, %v; want seq 2", m, err)
	}
	if _, err := c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{Seq: 4, NextBySubject: "dlq.a"}); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("GetMsg past the end: %v, want ErrMsgNotFound", err)
	}
	if err := c.DeleteMsg(ctx, "DLQ", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{Seq: 1}); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("GetMsg of a deleted message: %v, want ErrMsgNotFound", err)
	}
	info, err := c.StreamInfo(ctx, "DLQ", "dlq.a")
	if err != nil || info.State.Subjects["dlq.a"] != 1 || info.State.LastSeq != 3 {
		t.Errorf("StreamInfo = %+v, %v; want 1 message on dlq.a, last seq 3", info, err)
	}
}

// A refused request fails at once with the server's violation naming the
// subject, instead of after the request timeout.
func TestRefused(t *testing.T) {
	opts := &server.Options{JetStream: true, Users: []*server.User{{
		Username: "u", Password: "p",
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.STREAM.NAMES"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		},
	}}}
	s := natsconntest.StartServer(t, opts)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("u", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := jsapi.New(nc, "$JS.API")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // below the 5 s request timeout
	defer cancel()
	if _, err := c.StreamNames(ctx, ""); err != nil {
		t.Fatalf("permitted request: %v", err)
	}
	_, err = c.GetMsg(ctx, "DLQ", jsapi.GetMsgRequest{Seq: 1})
	var re *jsapi.RefusedError
	if !errors.As(err, &re) || re.Subject != "$JS.API.STREAM.MSG.GET.DLQ" || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Errorf("refused request error = %v, want a RefusedError naming $JS.API.STREAM.MSG.GET.DLQ", err)
	}
}
