package runner

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	none := Retry{Jitter: JitterNone}
	for _, tt := range []struct {
		name    string
		attempt int
		r       Retry
		u       float64
		want    time.Duration
	}{
		{"defaults attempt 1", 1, none, 0, time.Second},
		{"defaults attempt 2", 2, none, 0, 2 * time.Second},
		{"defaults attempt 3", 3, none, 0, 4 * time.Second},
		{"defaults attempt 6", 6, none, 0, 32 * time.Second},
		{"defaults attempt 7 capped at 60 s", 7, none, 0, 60 * time.Second},
		{"defaults attempt 8 capped", 8, none, 0, 60 * time.Second},
		{"attempt 0 counts as 1", 0, none, 0, time.Second},
		{"negative attempt counts as 1", -3, none, 0, time.Second},
		{"fixed ignores attempt", 9, Retry{Mode: ModeFixed, Backoff: new(300 * time.Millisecond), Jitter: JitterNone}, 0, 300 * time.Millisecond},
		{"linear", 3, Retry{Mode: ModeLinear, Backoff: new(100 * time.Millisecond), Jitter: JitterNone}, 0, 300 * time.Millisecond},
		{"linear capped", 5, Retry{Mode: ModeLinear, Backoff: new(time.Second), MaxBackoff: new(2500 * time.Millisecond), Jitter: JitterNone}, 0, 2500 * time.Millisecond},
		{"exponential multiplier 1.5", 3, Retry{Multiplier: 1.5, Backoff: new(time.Second), Jitter: JitterNone}, 0, 2250 * time.Millisecond},
		{"exponential overflow becomes the max", 100000, Retry{Multiplier: 10, Jitter: JitterNone}, 0, 60 * time.Second},
		{"huge linear capped", 1 << 30, Retry{Mode: ModeLinear, Jitter: JitterNone, MaxBackoff: new(time.Hour)}, 0, time.Hour},
		{"backoff 0 is no delay", 4, Retry{Backoff: new(time.Duration(0)), Jitter: JitterNone}, 0.5, 0},
		{"max 0 is no delay", 4, Retry{MaxBackoff: new(time.Duration(0))}, 0.5, 0},
		{"full jitter scales by u", 1, Retry{}, 0.25, 250 * time.Millisecond},
		{"full jitter u 0", 2, Retry{}, 0, 0},
		{"full jitter largest u", 1, Retry{}, 0.999999, 999999 * time.Microsecond},
		{"equal jitter u 0 is half", 2, Retry{Jitter: JitterEqual}, 0, time.Second},
		{"equal jitter u 0.5", 2, Retry{Jitter: JitterEqual}, 0.5, 1500 * time.Millisecond},
		{"equal jitter capped", 10, Retry{Jitter: JitterEqual}, 0.5, 45 * time.Second},
		{"full jitter on capped value", 10, Retry{Jitter: JitterFull}, 0.5, 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Backoff(tt.attempt, tt.r, tt.u); got != tt.want {
				t.Errorf("Backoff(%d, %+v, %v) = %v, want %v", tt.attempt, tt.r, tt.u, got, tt.want)
			}
		})
	}
}

func TestJitterDrawRange(t *testing.T) {
	for range 1000 {
		u := JitterDraw()
		if u < 0 || u >= 1 {
			t.Fatalf("JitterDraw() = %v, want in [0, 1)", u)
		}
		if math.Abs(u*1e6-math.Round(u*1e6)) > 1e-6 {
			t.Fatalf("JitterDraw() = %v, want a multiple of 1e-6", u)
		}
	}
}
