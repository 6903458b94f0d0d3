package ops

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 5, 29, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-05-29T10:00:00Z", now},
		{"2026-05-29T12:00:00.5+02:00", now.Add(500 * time.Millisecond)},
		{"30s", now.Add(-30 * time.Second)},
		{"30m", now.Add(-30 * time.Minute)},
		{"2h", now.Add(-2 * time.Hour)},
		{"7d", now.Add(-7 * 24 * time.Hour)},
		{"0m", now},
	} {
		got, err := ParseTime("--since", tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "m", "30", "-5m", "+5m", "5w", "2026-05-29T10:00:00", "yesterday", "1.5h"} {
		_, err := ParseTime("--since", in, now)
		want := `--since: expected an RFC 3339 time or an age like 30m (got "` + in + `")`
		if err == nil || err.Error() != want || !IsConfigError(err) {
			t.Errorf("ParseTime(%q) error = %v, want configuration error %q", in, err, want)
		}
	}
}

func TestReadyzAddress(t *testing.T) {
	for in, want := range map[string]string{
		":9464":          "127.0.0.1:9464",
		"0.0.0.0:9464":   "127.0.0.1:9464",
		"[::]:9464":      "[::1]:9464",
		"10.0.0.5:9464":  "10.0.0.5:9464",
		"[::1]:9464":     "[::1]:9464",
		"localhost:9464": "localhost:9464",
	} {
		if got := ReadyzAddress(in); got != want {
			t.Errorf("ReadyzAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
