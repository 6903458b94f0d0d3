package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// TestEnsureConsumerOldServer runs consumer management against the
// machine's nats-server (2.9 here): features it lacks must be refused
// before anything is created, naming the key and the version they need,
// and nothing may be left on the server.
func TestEnsureConsumerOldServer(t *testing.T) {
	url := natstest.Service(t, "NATS_SINKS_TEST_NATS_URL")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer nc.Close()
	if v := nc.ConnectedServerVersion(); !strings.HasPrefix(v, "2.9.") {
		t.Skipf("the machine's server is %s; this test is about a 2.9 server", v)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(time.Now().UnixNano())
	stream, subject := "RUNNER_OLD_"+id, "runner-old."+id
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	base := func() ConsumerSpec {
		return ConsumerSpec{Stream: stream, Name: "old-sink", Subject: subject + ".>"}
	}
	version := nc.ConnectedServerVersion()

	for _, tt := range []struct {
		name string
		edit func(*ConsumerSpec)
		want string
	}{
		{"filter_subjects", func(s *ConsumerSpec) { s.FilterSubjects = []string{subject + ".a", subject + ".b"} },
			"consumer_management.filter_subjects: several filter subjects need nats-server 2.10.0 or newer (the server is " + version + ")"},
		{"metadata", func(s *ConsumerSpec) { s.Metadata = map[string]string{"team": "billing"} },
			"consumer_management.metadata: consumer metadata needs nats-server 2.10.0 or newer (the server is " + version + ")"},
		{"ephemeral with filter_subjects", func(s *ConsumerSpec) {
			s.Ephemeral = true
			s.FilterSubjects = []string{subject + ".a", subject + ".b"}
		}, "consumer_management.filter_subjects: several filter subjects need nats-server 2.10.0 or newer (the server is " + version + ")"},
	} {
		for _, mode := range []string{ModeCreateIfMissing, ModeReconcile, ModeBindOnly} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				t.Cleanup(func() { deleteConsumers(t, js, stream) })
				s := base()
				s.Mode = mode
				tt.edit(&s)
				_, _, err := EnsureConsumer(t.Context(), js, s)
				var ce *ConfigError
				if !errors.As(err, &ce) || err.Error() != tt.want {
					t.Errorf("EnsureConsumer() = %v, want *ConfigError %q", err, tt.want)
				}
				if names := consumerNames(t, js, stream); len(names) != 0 {
					t.Errorf("consumers on the server after the refusal: %v, want none", names)
				}
			})
		}
	}

	t.Run("reconcile of an existing consumer", func(t *testing.T) {
		t.Cleanup(func() { deleteConsumers(t, js, stream) })
		s := base()
		if _, action, err := EnsureConsumer(t.Context(), js, s); err != nil || action != ActionCreated {
			t.Fatalf("EnsureConsumer(basic) = %q, %v, want created", action, err)
		}
		s.Mode = ModeReconcile
		s.FilterSubjects = []string{subject + ".a", subject + ".b"}
		_, _, err := EnsureConsumer(t.Context(), js, s)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != "consumer_management.filter_subjects" {
			t.Errorf("EnsureConsumer(reconcile, filter_subjects) = %v, want *ConfigError at consumer_management.filter_subjects", err)
		}
		// The consumer keeps its filter: the update was never sent.
		c, err := js.Consumer(t.Context(), stream, "old-sink")
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.CachedInfo().Config
		if cfg.FilterSubject != subject+".>" || len(cfg.FilterSubjects) != 0 {
			t.Errorf("filter after the refused reconcile = %q %v, want %q", cfg.FilterSubject, cfg.FilterSubjects, subject+".>")
		}
	})

	t.Run("basic path still works", func(t *testing.T) {
		s := base()
		s.Name = "old-sink-basic"
		s.FilterSubjects = []string{subject + ".a"} // one filter: FilterSubject, known to 2.9
		c, action, err := EnsureConsumer(t.Context(), js, s)
		if err != nil || action != ActionCreated {
			t.Fatalf("EnsureConsumer() = %q, %v, want created", action, err)
		}
		if got := c.CachedInfo().Config.FilterSubject; got != subject+".a" {
			t.Errorf("FilterSubject = %q, want %q", got, subject+".a")
		}
	})
}

// TestEnsureConsumerNewServer is the same configuration against the
// embedded (2.10+) server: several filters and metadata are created as
// configured.
func TestEnsureConsumerNewServer(t *testing.T) {
	e := newEnv(t, false)
	s := ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>",
		FilterSubjects: []string{"orders.a", "orders.b"}, Metadata: map[string]string{"team": "billing"}}
	c, action, err := EnsureConsumer(t.Context(), e.js, s)
	if err != nil || action != ActionCreated {
		t.Fatalf("EnsureConsumer() = %q, %v, want created (server %s)", action, err, e.nc.ConnectedServerVersion())
	}
	cfg := c.CachedInfo().Config
	if diff := cmp.Diff([]string{"orders.a", "orders.b"}, cfg.FilterSubjects); diff != "" || cfg.Metadata["team"] != "billing" {
		t.Errorf("created filters (-want +got):\n%s metadata %v", diff, cfg.Metadata)
	}
}

func TestServerSupports(t *testing.T) {
	for _, tt := range []struct {
		version string
		level   int
		want    bool
	}{
		{"2.9.10", 0, false},
		{"2.9.99", 0, false},
		{"2.10.0", 0, true},
		{"2.10.0-RC.3", 0, true},
		{"2.15.2", 0, true},
		{"3.0.0", 0, true},
		{"1.99.0", 0, false},
		// A reported JetStream API level means 2.11 or newer behind
		// whatever server the client is connected to (a leaf node).
		{"2.9.10", 1, true},
		{"", 0, false},
		{"garbage", 0, false},
	} {
		if got := serverAtLeast(tt.version, tt.level, minVersion210); got != tt.want {
			t.Errorf("serverAtLeast(%q, level %d, 2.10.0) = %v, want %v", tt.version, tt.level, got, tt.want)
		}
	}
}

// TestVerifyCreated checks the second line of defence: when the server
// that holds the consumer (behind a leaf node, possibly older than the one
// the client is connected to) answers a create with other settings than
// asked for, the consumer is deleted again and the difference is a
// configuration error.
func TestVerifyCreated(t *testing.T) {
	e := newEnv(t, false)
	// What a 2.9 server does with filter_subjects: it ignores the field
	// and creates a consumer without any filter.
	c, err := e.js.CreateConsumer(t.Context(), testStream, jetstream.ConsumerConfig{Durable: testConsumer, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	s := ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>", FilterSubjects: []string{"orders.a", "orders.b"}}
	err = verifyCreated(t.Context(), e.js, s, c)
	want := `consumer_management: the server created durable consumer "orders-sink" on stream "ORDERS" with settings other than configured ` +
		`(filter_subjects expected=[orders.a,orders.b] actual=[]); it was deleted again`
	var ce *ConfigError
	if !errors.As(err, &ce) || err.Error() != want {
		t.Errorf("verifyCreated() = %v, want *ConfigError %q", err, want)
	}
	if names := consumerNames(t, e.js, testStream); len(names) != 0 {
		t.Errorf("consumers after verifyCreated: %v, want none", names)
	}
}

func consumerNames(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	ctx := context.Background() // also used from cleanups
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := st.ConsumerNames(ctx)
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func deleteConsumers(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	for _, n := range consumerNames(t, js, stream) {
		if err := js.DeleteConsumer(context.Background(), stream, n); err != nil {
			t.Errorf("delete consumer %s: %v", n, err)
		}
	}
}
