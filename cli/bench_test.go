package cli

import (
	"math"
	"testing"
)

// TestBenchSummary: with several rounds, a phase's rate is the median of
// its rounds' rates and its % of ceiling the median of each round's own
// ratio (not the ratio of the medians).
func TestBenchSummary(t *testing.T) {
	round := func(ceiling, pipe float64) []benchRow {
		return []benchRow{
			{"publish", 100, 1},
			{"consume+ack ceiling", 100, 100 / ceiling},
			{"pipeline (x)", 100, 100 / pipe},
		}
	}
	got := summarise([][]benchRow{round(100, 50), round(200, 60), round(100, 45)})
	if len(got) != 3 || !math.IsNaN(got[0].Percent) {
		t.Fatalf("phases = %+v, want 3 with no %% for publish", got)
	}
	p := got[2]
	if math.Abs(p.Rate-50) > 1e-9 || math.Abs(p.Percent-45) > 1e-9 {
		t.Errorf("pipeline rate %.3f, %% of ceiling %.3f; want 50 (median rate) and 45 (median of 50, 30, 45)", p.Rate, p.Percent)
	}
	if c := got[1]; math.Abs(c.Rate-100) > 1e-9 || c.Percent != 100 {
		t.Errorf("ceiling = %+v, want rate 100 and 100 %%", c)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", m)
	}
}
