package cli

import "testing"

func TestProgressLine(t *testing.T) {
	for _, tt := range []struct {
		done, total int
		rate        float64
		paused      bool
		want        string
	}{
		{50210, 100000, 4120, false, "ORDERS [##########----------]  50.2%  50,210/100,000  4,120 msg/s  ETA 0:00:12"},
		{0, 100000, 0, false, "ORDERS [--------------------]   0.0%  0/100,000  0 msg/s  ETA -:--:--"},
		{100000, 100000, 9000, false, "ORDERS [####################] 100.0%  100,000/100,000  9,000 msg/s  ETA 0:00:00"},
		{10, 4000000, 1, false, "ORDERS [--------------------]   0.0%  10/4,000,000  1 msg/s  ETA 1111:06:30"},
		{500, 1000, 3, true, "ORDERS [##########----------]  50.0%  500/1,000  3 msg/s  paused: sink unhealthy"},
		{5, -1, 2, false, "ORDERS [--------------------]   0.0%  5/?  2 msg/s  ETA -:--:--"},
	} {
		if got := progressLine("ORDERS", tt.done, tt.total, tt.rate, tt.paused); got != tt.want {
			t.Errorf("progressLine(%d, %d, %v, %v) =\n%q, want\n%q", tt.done, tt.total, tt.rate, tt.paused, got, tt.want)
		}
	}
}
