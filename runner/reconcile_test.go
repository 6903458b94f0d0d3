package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureConsumerEveryField creates a consumer with every optional field
// of docs/delivery.md#consumer-management configured, checks the server holds each one, and that
// binding with the same spec finds no drift.
func TestEnsureConsumerEveryField(t *testing.T) {
	e := newEnv(t, false)
	s := ConsumerSpec{
		Stream: testStream, Name: testConsumer, Subject: "orders.>",
		FilterSubjects: []string{"orders.a", "orders.b"},
		DeliverPolicy:  "last_per_subject", ReplayPolicy: "original",
		AckWait: new(20 * time.Second), MaxDeliver: new(9),
		MaxAckPending: new(321), MaxWaiting: new(17), HeadersOnly: new(true),
		Replicas: new(1), MemoryStorage: new(true),
		Metadata: map[string]string{"team": "audit", "tier": "gold"},
	}
	c, action, err := EnsureConsumer(t.Context(), e.js, s)
	if err != nil || action != ActionCreated {
		t.Fatalf("EnsureConsumer() = %q, %v, want created", action, err)
	}
	got := e.info(c).Config
	want := jetstream.ConsumerConfig{
		Name: testConsumer, Durable: testConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubjects: []string{"orders.a", "orders.b"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy, ReplayPolicy: jetstream.ReplayOriginalPolicy,
		AckWait: 20 * time.Second, MaxDeliver: 9, MaxAckPending: 321, MaxWaiting: 17,
		HeadersOnly: true, Replicas: 1, MemoryStorage: true,
		Metadata: map[string]string{"team": "audit", "tier": "gold"},
	}
	opts := cmp.Options{
		// Fields the spec does not set, and the server's own _nats.* keys.
		cmpIgnoreConsumerExtras(),
	}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("server consumer config mismatch (-want +got):\n%s", diff)
	}
	s.Mode = ModeBindOnly
	if _, action, err := EnsureConsumer(t.Context(), e.js, s); err != nil || action != ActionBound {
		t.Errorf("EnsureConsumer(bind_only, same spec) = %q, %v, want bound", action, err)
	}

	// The BackOff form (not with AckWait) on a second consumer.
	b := ConsumerSpec{Stream: testStream, Name: "with-backoff", Subject: "orders.>",
		MaxDeliver: new(3), BackOff: []time.Duration{time.Second, 5 * time.Second}}
	c, _, err = EnsureConsumer(t.Context(), e.js, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 5 * time.Second}, e.info(c).Config.BackOff); diff != "" {
		t.Errorf("BackOff mismatch (-want +got):\n%s", diff)
	}
	b.BackOff = []time.Duration{time.Second, 6 * time.Second}
	_, _, err = EnsureConsumer(t.Context(), e.js, b)
	wantErr := `consumer_management: durable consumer "with-backoff" on stream "ORDERS" has incompatible settings: backoff expected=[1,6] actual=[1,5]`
	if err == nil || err.Error() != wantErr {
		t.Errorf("EnsureConsumer(backoff drift) = %v, want %s", err, wantErr)
	}
}

// TestDriftEveryField checks the class of every field of docs/delivery.md#consumer-management: in
// create_if_missing mode any difference is refused, and reconcile refuses
// the immutable ones.
func TestDriftEveryField(t *testing.T) {
	server := jetstream.ConsumerConfig{
		Name: "c", Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "orders.>",
		DeliverPolicy: jetstream.DeliverAllPolicy, ReplayPolicy: jetstream.ReplayInstantPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1000, MaxWaiting: 512,
		Replicas: 1, Metadata: map[string]string{"team": "a", "_nats.level": "1"},
	}
	base := ConsumerSpec{Stream: "S", Name: "c", Subject: "orders.>"}
	for _, tt := range []struct {
		name      string
		edit      func(*ConsumerSpec)
		item      string
		immutable bool
	}{
		{"filters", func(s *ConsumerSpec) { s.FilterSubjects = []string{"orders.a", "orders.b"} }, "filter_subjects expected=[orders.a,orders.b] actual=[orders.>]", false},
		{"deliver policy", func(s *ConsumerSpec) { s.DeliverPolicy = "new" }, "deliver_policy expected=new actual=all", true},
		{"replay policy", func(s *ConsumerSpec) { s.ReplayPolicy = "original" }, "replay_policy expected=original actual=instant", true},
		{"headers only", func(s *ConsumerSpec) { s.HeadersOnly = new(true) }, "headers_only expected=true actual=false", false},
		{"ack wait", func(s *ConsumerSpec) { s.AckWait = new(31 * time.Second) }, "ack_wait expected=31 actual=30", false},
		{"backoff", func(s *ConsumerSpec) { s.BackOff = []time.Duration{time.Second} }, "backoff expected=[1] actual=[]", false},
		{"max deliver", func(s *ConsumerSpec) { s.MaxDeliver = new(6) }, "max_deliver expected=6 actual=5", false},
		{"max ack pending", func(s *ConsumerSpec) { s.MaxAckPending = new(10) }, "max_ack_pending expected=10 actual=1000", false},
		{"replicas", func(s *ConsumerSpec) { s.Replicas = new(3) }, "num_replicas expected=3 actual=1", false},
		{"max waiting", func(s *ConsumerSpec) { s.MaxWaiting = new(1) }, "max_waiting expected=1 actual=512", true},
		{"mem storage", func(s *ConsumerSpec) { s.MemoryStorage = new(true) }, "mem_storage expected=true actual=false", true},
		{"metadata", func(s *ConsumerSpec) { s.Metadata = map[string]string{"team": "b"} }, "metadata.team expected=b actual=a", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.edit(&s)
			items := drift(s, server)
			if len(items) != 1 {
				t.Fatalf("drift() = %+v, want exactly one item", items)
			}
			d := items[0]
			if got := d.field + " expected=" + d.expected + " actual=" + d.actual; got != tt.item || d.immutable != tt.immutable {
				t.Errorf("drift() = %q immutable=%v, want %q immutable=%v", got, d.immutable, tt.item, tt.immutable)
			}
		})
	}
	t.Run("pull shape, ack policy and identity are immutable", func(t *testing.T) {
		bad := server
		bad.DeliverSubject, bad.AckPolicy, bad.Durable, bad.Name = "push.here", jetstream.AckAllPolicy, "other", "other"
		var got []string
		for _, d := range drift(base, bad) {
			if !d.immutable {
				t.Errorf("drift item %s is mutable, want immutable", d.field)
			}
			got = append(got, d.field)
		}
		if diff := cmp.Diff([]string{"durable_name", "deliver_subject", "ack_policy"}, got); diff != "" {
			t.Errorf("drift fields mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("no drift: unconfigured fields, server metadata keys, ack wait within 1 ms", func(t *testing.T) {
		s := base
		s.AckWait = new(30*time.Second + 900*time.Microsecond)
		s.Metadata = map[string]string{"team": "a"}
		if items := drift(s, server); len(items) != 0 {
			t.Errorf("drift() = %+v, want none", items)
		}
	})
}

func TestReconcile(t *testing.T) {
	e := newEnv(t, false)
	orig := ConsumerSpec{
		Stream: testStream, Name: testConsumer, Subject: "orders.>",
		FilterSubjects: []string{"orders.a"},
		AckWait:        new(30 * time.Second), MaxDeliver: new(5), MaxAckPending: new(100),
		MaxWaiting: new(10), Metadata: map[string]string{"team": "billing", "owner": "ops"},
	}
	c, action, err := EnsureConsumer(t.Context(), e.js, orig)
	if err != nil || action != ActionCreated {
		t.Fatalf("EnsureConsumer(create) = %q, %v", action, err)
	}
	before := e.info(c).Config

	t.Run("updates mutable fields and keeps the rest", func(t *testing.T) {
		s := ConsumerSpec{
			Stream: testStream, Name: testConsumer, Subject: "orders.>", Mode: ModeReconcile,
			FilterSubjects: []string{"orders.b", "orders.a"},
			AckWait:        new(45 * time.Second), MaxDeliver: new(7), MaxAckPending: new(200),
			HeadersOnly: new(true), Metadata: map[string]string{"team": "audit"},
			// MaxWaiting not configured: the server's 10 must survive.
		}
		got, action, err := EnsureConsumer(t.Context(), e.js, s)
		if err != nil || action != ActionReconciled {
			t.Fatalf("EnsureConsumer(reconcile) = %q, %v, want reconciled", action, err)
		}
		cfg := e.info(got).Config
		want := before
		want.FilterSubject, want.FilterSubjects = "", []string{"orders.b", "orders.a"}
		want.AckWait, want.MaxDeliver, want.MaxAckPending, want.HeadersOnly = 45*time.Second, 7, 200, true
		want.Metadata = map[string]string{"team": "audit", "owner": "ops"}
		if diff := cmp.Diff(want, cfg, cmpIgnoreConsumerExtras()); diff != "" {
			t.Errorf("reconciled config mismatch (-want +got):\n%s", diff)
		}
		for k := range before.Metadata {
			if _, ok := cfg.Metadata[k]; !ok {
				t.Errorf("server metadata key %q lost by reconcile", k)
			}
		}
		// Nothing left to do: bound.
		if _, action, err := EnsureConsumer(t.Context(), e.js, s); err != nil || action != ActionBound {
			t.Errorf("EnsureConsumer(reconcile again) = %q, %v, want bound", action, err)
		}
	})

	t.Run("refuses immutable drift and changes nothing", func(t *testing.T) {
		prev := e.info(c).Config
		s := ConsumerSpec{
			Stream: testStream, Name: testConsumer, Subject: "orders.>", Mode: ModeReconcile,
			DeliverPolicy: "new", MemoryStorage: new(true), MaxWaiting: new(20),
			AckWait: new(50 * time.Second), // mutable, but must not be applied either
		}
		_, _, err := EnsureConsumer(t.Context(), e.js, s)
		want := `consumer_management: durable consumer "orders-sink" on stream "ORDERS" has incompatible settings: ` +
			`deliver_policy expected=new actual=all; max_waiting expected=20 actual=10; mem_storage expected=true actual=false`
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("EnsureConsumer(immutable drift):\n got %v\nwant %s", err, want)
		}
		if got := e.info(c).Config; got.AckWait != prev.AckWait {
			t.Errorf("AckWait = %v after a refused reconcile, want unchanged %v", got.AckWait, prev.AckWait)
		}
	})

	t.Run("refused update is a configuration error", func(t *testing.T) {
		s := ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>", Mode: ModeReconcile,
			Replicas: new(3)} // a single server cannot hold three replicas
		_, _, err := EnsureConsumer(t.Context(), e.js, s)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != "consumer_management" {
			t.Errorf("EnsureConsumer(replicas 3) = %v, want a consumer_management *ConfigError", err)
		}
	})

	t.Run("creates a missing consumer", func(t *testing.T) {
		s := ConsumerSpec{Stream: testStream, Name: "fresh", Subject: "orders.>", Mode: ModeReconcile}
		if _, action, err := EnsureConsumer(t.Context(), e.js, s); err != nil || action != ActionCreated {
			t.Errorf("EnsureConsumer(reconcile, absent) = %q, %v, want created", action, err)
		}
	})
}

// cmpIgnoreConsumerExtras compares only what consumer management sets: the
// server fills other fields with defaults, and adds _nats.* metadata keys.
func cmpIgnoreConsumerExtras() cmp.Option {
	return cmp.Transformer("managed", func(c jetstream.ConsumerConfig) jetstream.ConsumerConfig {
		md := map[string]string{}
		for k, v := range c.Metadata {
			if len(k) < 6 || k[:6] != "_nats." {
				md[k] = v
			}
		}
		return jetstream.ConsumerConfig{
			Name: c.Name, Durable: c.Durable, AckPolicy: c.AckPolicy, DeliverSubject: c.DeliverSubject,
			FilterSubject: c.FilterSubject, FilterSubjects: c.FilterSubjects,
			DeliverPolicy: c.DeliverPolicy, ReplayPolicy: c.ReplayPolicy, AckWait: c.AckWait,
			MaxDeliver: c.MaxDeliver, BackOff: c.BackOff, MaxAckPending: c.MaxAckPending,
			MaxWaiting: c.MaxWaiting, HeadersOnly: c.HeadersOnly, Replicas: c.Replicas,
			MemoryStorage: c.MemoryStorage, Metadata: md,
		}
	})
}
