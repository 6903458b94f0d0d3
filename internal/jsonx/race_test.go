//go:build race

package jsonx_test

// raceEnabled reports a -race build. Its sync.Pool drops items at random on
// purpose, so allocation counts of pooled code mean nothing there.
const raceEnabled = true
