package natstest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// recorderTB captures Skip and Fatal from the helper under test. Both end the
// calling goroutine, as the testing package does.
type recorderTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorderTB) Helper() {}
func (r *recorderTB) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorderTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func call(_ testing.TB, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestService(t *testing.T) {
	for _, tt := range []struct {
		name, value, require  string
		want                  string
		wantSkip, wantFailure bool
	}{
		{"set", "postgres://localhost/x", "", "postgres://localhost/x", false, false},
		{"unset skips", "", "", "", true, false},
		{"unset fails in CI", "", "1", "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATSTEST_SERVICE_X", tt.value)
			t.Setenv(RequireServicesEnv, tt.require)
			r := &recorderTB{TB: t}
			var got string
			call(r, func() { got = Service(r, "NATSTEST_SERVICE_X") })
			if got != tt.want || r.skipped != tt.wantSkip || r.failed != tt.wantFailure {
				t.Errorf("Service() = %q, skipped %v, failed %v, want %q, %v, %v",
					got, r.skipped, r.failed, tt.want, tt.wantSkip, tt.wantFailure)
			}
			if (r.skipped || r.failed) && r.msg == "" {
				t.Errorf("Service() gave no reason")
			}
		})
	}
}

func TestWaitForTimesOut(t *testing.T) {
	r := &recorderTB{TB: t}
	call(r, func() { WaitFor(r, 30*time.Millisecond, func() error { return errors.New("never") }) })
	if !r.failed {
		t.Errorf("WaitFor did not fail when the condition never held")
	}
	n := 0
	WaitFor(t, time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
}

func TestRestartKeepsStreamAndPort(t *testing.T) {
	s := RunJetStream(t)
	nc, js := Connect(t, s)
	CreateStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	PublishN(t, js, "s.x", 3, func(i int) []byte { return []byte{byte(i)} })
	port := Port(s)
	s2 := Restart(t, s)
	if Port(s2) != port {
		t.Errorf("restarted on port %d, want %d", Port(s2), port)
	}
	// Wait for the reconnect itself: right after the restart the client may
	// still report the old, dead connection as connected, and a publish
	// written to it is lost (its PubAck never comes).
	WaitFor(t, 10*time.Second, func() error {
		if !nc.IsConnected() || nc.Stats().Reconnects == 0 {
			return errors.New("not reconnected")
		}
		return nil
	})
	Publish(t, js, "s.x", []byte("after"), nil)
	st, err := js.Stream(t.Context(), "S")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 4 {
		t.Errorf("stream holds %d messages after restart, want 4", n)
	}
}
