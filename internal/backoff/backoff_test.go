package backoff

import (
	"context"
	"testing"
	"time"
)

// The runner's, the http sink's and the s3 sink's tests check the formula
// through their own settings; this covers the edges once.
func TestDelay(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		p       Policy
		attempt int
		u       float64
		want    time.Duration
	}{
		{Policy{Base: 100 * ms, Max: time.Second, Mode: "fixed", Jitter: "none"}, 5, 0.3, 100 * ms},
		{Policy{Base: 100 * ms, Max: time.Second, Mode: "linear", Jitter: "none"}, 3, 0.3, 300 * ms},
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 2, Jitter: "none"}, 3, 0.3, 400 * ms},
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 2, Jitter: "none"}, 10, 0.3, time.Second},  // capped
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 10, Jitter: "none"}, 5000, 0, time.Second}, // Inf → cap
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 2, Jitter: "equal"}, 1, 0.5, 75 * ms},      // 50 + 50·0.5
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 2, Jitter: "full"}, 1, 0.25, 25 * ms},      // 100·0.25
		{Policy{Base: 100 * ms, Max: time.Second, Multiplier: 2, Jitter: "none"}, 0, 0.5, 100 * ms},      // attempt 0 → 1
		{Policy{Base: 0, Max: time.Second, Multiplier: 2, Jitter: "none"}, 3, 0.5, 0},                    // no delay
	}
	for _, tt := range tests {
		if got := tt.p.Delay(tt.attempt, tt.u); got != tt.want {
			t.Errorf("%+v.Delay(%d, %v) = %v, want %v", tt.p, tt.attempt, tt.u, got, tt.want)
		}
	}
}

func TestDrawAndSleep(t *testing.T) {
	for range 1000 {
		if u := Draw(); u < 0 || u >= 1 {
			t.Fatalf("Draw() = %v, want [0, 1)", u)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
}
