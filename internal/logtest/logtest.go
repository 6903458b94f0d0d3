// Package logtest checks log output in tests: that no payload, header value
// or secret appears, and that records carry only the allowed keys
// (docs/observability.md#logs). It lives apart from package telemetry so that the
// binary does not link package testing.
package logtest

import (
	"bufio"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// AllowedLogKeys returns the keys a JSON log record may carry
// (docs/observability.md#logs): time, level, msg, component, the context keys, and
// suppressed (added by the rate limiter). The keys only allowed on the
// "starting" record (version, durable, batch_size, in_flight, dlq,
// encryption, tracing, metrics_listen) are included; AssertLogKeys checks
// that they appear on no other record.
func AllowedLogKeys() []string {
	return append([]string{
		"time", "level", "msg", "component",
		"stream", "consumer", "subject", "stream_sequence", "batch_id", "count", "attempt",
		"delay_ms", "duration_ms", "outcome", "error", "error_type", "sink", "table",
		"object_key", "file", "mode", "action", "status", "trace_id", "suppressed",
	}, startingOnlyKeys()...)
}

func startingOnlyKeys() []string {
	return []string{"version", "durable", "batch_size", "in_flight", "dlq", "encryption", "tracing", "metrics_listen"}
}

// AssertLogSafe fails t if any of secrets (credentials, payload bytes,
// header values, DSNs...) appears in logOutput, raw or in the escaped forms
// the JSON and text formats would give it. Empty secrets are ignored. The
// failure message names the secret by position, not by value.
func AssertLogSafe(t testing.TB, logOutput string, secrets ...string) {
	t.Helper()
	for i, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range escapedForms(s) {
			if at := strings.Index(logOutput, form); at >= 0 {
				t.Errorf("log output contains secret #%d at byte %d", i, at)
				break
			}
		}
	}
}

func escapedForms(s string) []string {
	forms := []string{s}
	if b, err := json.Marshal(s); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	forms = append(forms, strings.Trim(strconv.Quote(s), `"`))
	slices.Sort(forms)
	return slices.Compact(forms)
}

// AssertLogKeys fails t if a JSON-format record in logOutput (one object
// per line) has a key outside AllowedLogKeys, or a "starting"-only key on
// another record. Lines that are not JSON objects fail too.
func AssertLogKeys(t testing.TB, logOutput string) {
	t.Helper()
	allowed := AllowedLogKeys()
	startOnly := startingOnlyKeys()
	sc := bufio.NewScanner(strings.NewReader(logOutput))
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("log line %d is not a JSON object: %v", line, err)
			continue
		}
		for k := range rec {
			switch {
			case !slices.Contains(allowed, k):
				t.Errorf("log line %d (msg %q): key %q is not on the allow-list", line, rec["msg"], k)
			case slices.Contains(startOnly, k) && rec["msg"] != "starting":
				t.Errorf("log line %d (msg %q): key %q is allowed only on \"starting\"", line, rec["msg"], k)
			}
		}
	}
}
