package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEnsureConsumer(t *testing.T) {
	e := newEnv(t, true)
	base := func() ConsumerSpec {
		return ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>"}
	}

	t.Run("bind_only missing", func(t *testing.T) {
		s := base()
		s.Mode = ModeBindOnly
		_, _, err := EnsureConsumer(t.Context(), e.js, s)
		want := `consumer_management: JetStream durable consumer "orders-sink" does not exist in stream "ORDERS"`
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("EnsureConsumer() = %v, want *ConfigError %q", err, want)
		}
	})

	t.Run("create then bind", func(t *testing.T) {
		s := base()
		s.FilterSubjects = []string{"orders.a", "orders.b"}
		s.AckWait = new(30 * time.Second)
		s.MaxDeliver = new(5)
		s.BackOff = nil
		s.MaxAckPending = new(2000)
		s.HeadersOnly = new(false)
		s.Metadata = map[string]string{"team": "billing"}
		c, action, err := EnsureConsumer(t.Context(), e.js, s)
		if err != nil || action != ActionCreated {
			t.Fatalf("EnsureConsumer() = %q, %v, want created", action, err)
		}
		cfg := c.CachedInfo().Config
		if cfg.Durable != testConsumer || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.MaxDeliver != 5 ||
			cfg.MaxAckPending != 2000 || cfg.AckWait != 30*time.Second || cfg.Metadata["team"] != "billing" {
			t.Errorf("created config = %+v", cfg)
		}
		if diff := cmp.Diff([]string{"orders.a", "orders.b"}, cfg.FilterSubjects); diff != "" {
			t.Errorf("filter subjects mismatch (-want +got):\n%s", diff)
		}
		// Same settings, filters in another order: bound, no drift, even
		// though the server added _nats.* metadata keys.
		s.FilterSubjects = []string{"orders.b", "orders.a"}
		s.Mode = ModeBindOnly
		_, action, err = EnsureConsumer(t.Context(), e.js, s)
		if err != nil || action != ActionBound {
			t.Errorf("EnsureConsumer() again = %q, %v, want bound", action, err)
		}

		// Drift: every differing field in one line.
		s.AckWait = new(60 * time.Second)
		s.MaxDeliver = new(7)
		s.DeliverPolicy = "new"
		s.Metadata = map[string]string{"team": "ops", "tier": "gold"}
		_, _, err = EnsureConsumer(t.Context(), e.js, s)
		want := `consumer_management: durable consumer "orders-sink" on stream "ORDERS" has incompatible settings: ` +
			`deliver_policy expected=new actual=all; ack_wait expected=60 actual=30; max_deliver expected=7 actual=5; ` +
			`metadata.team expected=ops actual=billing; metadata.tier expected=gold actual=<absent>`
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("EnsureConsumer() drift error:\n got %v\nwant %s", err, want)
		}
		if err := e.js.DeleteConsumer(t.Context(), testStream, testConsumer); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ack wait within tolerance is no drift", func(t *testing.T) {
		s := base()
		s.AckWait = new(10 * time.Second)
		if _, _, err := EnsureConsumer(t.Context(), e.js, s); err != nil {
			t.Fatal(err)
		}
		s.AckWait = new(10*time.Second + 500*time.Microsecond)
		if _, action, err := EnsureConsumer(t.Context(), e.js, s); err != nil || action != ActionBound {
			t.Errorf("EnsureConsumer() = %q, %v, want bound", action, err)
		}
		s.Subject = "orders.created"
		_, _, err := EnsureConsumer(t.Context(), e.js, s)
		want := `consumer_management: durable consumer "orders-sink" on stream "ORDERS" has incompatible settings: filter_subjects expected=[orders.created] actual=[orders.>]`
		if err == nil || err.Error() != want {
			t.Errorf("EnsureConsumer() = %v, want %s", err, want)
		}
		if err := e.js.DeleteConsumer(t.Context(), testStream, testConsumer); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ephemeral", func(t *testing.T) {
		s := base()
		s.Ephemeral = true
		s.HeadersOnly = new(true)
		c, action, err := EnsureConsumer(t.Context(), e.js, s)
		if err != nil || action != ActionEphemeral {
			t.Fatalf("EnsureConsumer() = %q, %v, want ephemeral", action, err)
		}
		cfg := c.CachedInfo().Config
		if cfg.Durable != "" || cfg.InactiveThreshold != 5*time.Minute || !cfg.HeadersOnly {
			t.Errorf("ephemeral config = %+v", cfg)
		}
	})

	t.Run("stream missing", func(t *testing.T) {
		s := base()
		s.Stream = "NOPE"
		_, _, err := EnsureConsumer(t.Context(), e.js, s)
		want := `nats.stream: JetStream stream "NOPE" does not exist`
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("EnsureConsumer() = %v, want *ConfigError %q", err, want)
		}
	})
}

func TestCheckDLQ(t *testing.T) {
	e := newEnv(t, true)
	name, err := CheckDLQ(t.Context(), e.js, dlqSubject)
	if err != nil || name != dlqStream {
		t.Errorf("CheckDLQ(%q) = %q, %v, want %q", dlqSubject, name, err, dlqStream)
	}
	_, err = CheckDLQ(t.Context(), e.js, "nowhere.dlq")
	want := `dead_letter.subject: no JetStream stream captures "nowhere.dlq"`
	var ce *ConfigError
	if !errors.As(err, &ce) || err.Error() != want {
		t.Errorf("CheckDLQ(nowhere.dlq) = %v, want *ConfigError %q", err, want)
	}
}

func TestDLQWindowWarning(t *testing.T) {
	e := newEnv(t, true) // DLQ stream: default 2 min duplicate window
	c := e.consumer(ConsumerSpec{AckWait: new(5 * time.Minute)})
	if w := DLQWindowWarning(t.Context(), e.js, dlqStream, c.CachedInfo()); w == "" {
		t.Errorf("DLQWindowWarning() = \"\" for AckWait 5m > window 2m, want a warning")
	}
	if err := e.js.DeleteConsumer(t.Context(), testStream, testConsumer); err != nil {
		t.Fatal(err)
	}
	c = e.consumer(ConsumerSpec{AckWait: new(30 * time.Second)})
	if w := DLQWindowWarning(t.Context(), e.js, dlqStream, c.CachedInfo()); w != "" {
		t.Errorf("DLQWindowWarning() = %q for AckWait 30s, want none", w)
	}
}

func TestCheckBatchSize(t *testing.T) {
	info := func(maxBatch int) *jetstream.ConsumerInfo {
		return &jetstream.ConsumerInfo{Config: jetstream.ConsumerConfig{MaxRequestBatch: maxBatch}}
	}
	for _, tt := range []struct {
		name  string
		info  *jetstream.ConsumerInfo
		batch int
		want  string
	}{
		{"no limit", info(0), 10000, ""},
		{"within", info(500), 500, ""},
		{"exceeds", info(500), 501, "delivery.batch_size: exceeds the consumer's max_batch 500"},
		{"no info", nil, 10, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBatchSize(tt.info, tt.batch)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckBatchSize(%d) = %q, want %q", tt.batch, got, tt.want)
			}
		})
	}
}

// deletingJS answers the first refusals creates with refusal, as a server
// does while a deletion of the same consumer is still in progress.
type deletingJS struct {
	jetstream.JetStream
	refusals int
	refusal  error
	creates  int
}

func (d *deletingJS) CreateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	d.creates++
	if d.creates <= d.refusals {
		return nil, d.refusal
	}
	return d.JetStream.CreateConsumer(ctx, stream, cfg)
}

// TestEnsureConsumerDeletionInProgress: a create refused right after a
// deletion, with "consumer does not exist" or "error creating store for
// consumer" (10012, seen in a load run after the second deletion of a
// running consumer), is tried again until the deletion finished (a
// consumer deleted while the process ran failed the re-creation with a
// runtime error before); a refusal that outlasts the wait is returned as
// it came, and other API errors are not tried again.
func TestEnsureConsumerDeletionInProgress(t *testing.T) {
	storeErr := fmt.Errorf("nats: API error: code=500 err_code=10012 description=error creating store for consumer: %w",
		&jetstream.APIError{Code: 500, ErrorCode: jetstream.JSErrCodeConsumerCreate, Description: "error creating store for consumer"})
	limitErr := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeMaximumConsumersLimit, Description: "maximum consumers limit reached"}
	for _, tt := range []struct {
		name        string
		refusal     error
		refusals    int
		wantErr     error // nil: created
		wantCreates int
	}{
		{"does not exist, then created", jetstream.ErrConsumerDoesNotExist, 3, nil, 4},
		{"does not exist outlasts the wait", jetstream.ErrConsumerDoesNotExist, deletionRetries, jetstream.ErrConsumerDoesNotExist, deletionRetries},
		{"store error, then created", storeErr, 2, nil, 3},
		{"limit error at once", limitErr, 1, limitErr, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, true)
			spec := ConsumerSpec{Stream: testStream, Name: testConsumer, Subject: "orders.>"}
			js := &deletingJS{JetStream: e.js, refusals: tt.refusals, refusal: tt.refusal}
			_, action, err := EnsureConsumer(t.Context(), js, spec)
			if tt.wantErr == nil && (err != nil || action != ActionCreated) {
				t.Fatalf("EnsureConsumer() = %q, %v, want created after the deletion finished", action, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("EnsureConsumer() = %v, want %v", err, tt.wantErr)
			}
			if js.creates != tt.wantCreates {
				t.Errorf("creates = %d, want %d", js.creates, tt.wantCreates)
			}
		})
	}
}
