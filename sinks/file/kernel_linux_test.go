package file

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for release, want := range map[string]bool{
		"6.18.44-fc-v782": true,
		"5.8.0":           true,
		"5.10.0-28-amd64": true,
		"5.7.19":          false,
		"4.19.0":          false,
		"garbage":         false,
		"":                false,
	} {
		if got := kernelAtLeast(release, 5, 8); got != want {
			t.Errorf("kernelAtLeast(%q, 5, 8) = %v, want %v", release, got, want)
		}
	}
}
