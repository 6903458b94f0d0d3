package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// minVersion210 is the first nats-server release that keeps several
// consumer filter subjects and consumer metadata. nats-server 2.9 ignores
// both fields: it creates a consumer without any filter (which then
// delivers the whole stream) or without the metadata.
var minVersion210 = [3]int{2, 10, 0}

// A feature is a configured consumer setting that needs a minimum server
// version.
type feature struct {
	path string // the configuration key
	what string // "several filter subjects need", as the error says it
	min  [3]int
}

// features lists the configured settings of spec that not every supported
// server knows. Everything else consumer management sets (ack wait,
// back-off, max_waiting, headers-only, replicas, memory storage, the
// deliver and replay policies, an ephemeral's inactive threshold) is
// known to 2.9.
func features(spec ConsumerSpec) []feature {
	var out []feature
	if len(spec.FilterSubjects) > 1 {
		// One entry is sent as the single filter_subject every server knows.
		out = append(out, feature{"consumer_management.filter_subjects", "several filter subjects need", minVersion210})
	}
	if len(spec.Metadata) > 0 {
		out = append(out, feature{"consumer_management.metadata", "consumer metadata needs", minVersion210})
	}
	return out
}

// checkServer refuses spec when the server lacks a configured feature: the
// version comes from the connection's INFO, and when that is too old, the
// JetStream API level (reported by nats-server 2.11 and newer in the
// account info) is asked as well, since behind a leaf node the JetStream
// server may be newer than the one the client is connected to. Every
// missing feature is a *ConfigError naming its key, joined.
func checkServer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) error {
	need := features(spec)
	if len(need) == 0 {
		return nil
	}
	version := js.Conn().ConnectedServerVersion()
	level := -1 // not asked yet
	var errs []error
	for _, f := range need {
		if serverAtLeast(version, 0, f.min) {
			continue
		}
		if level < 0 {
			level = apiLevel(ctx, js)
		}
		if serverAtLeast(version, level, f.min) {
			continue
		}
		errs = append(errs, featureMissing(js, f))
	}
	return errors.Join(errs...)
}

func featureMissing(js jetstream.JetStream, f feature) error {
	return &ConfigError{f.path, fmt.Sprintf("%s nats-server %d.%d.%d or newer (the server is %s)",
		f.what, f.min[0], f.min[1], f.min[2], js.Conn().ConnectedServerVersion())}
}

// apiLevel returns the JetStream API level the account info reports, or 0
// when it reports none (servers before 2.11) or cannot be read.
func apiLevel(ctx context.Context, js jetstream.JetStream) int {
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return 0
	}
	return info.API.Level
}

// serverAtLeast reports whether a server of version (as in INFO, e.g.
// "2.10.3" or "2.11.0-RC.1") with JetStream API level (0 if unknown) is at
// least min. API level 1 came with 2.11.0, so any reported level covers
// every release up to 2.11.0.
func serverAtLeast(version string, level int, min [3]int) bool {
	if level >= 1 && !less([3]int{2, 11, 0}, min) {
		return true
	}
	v, ok := parseVersion(version)
	return ok && !less(v, min)
}

// parseVersion reads major.minor.patch, ignoring a pre-release or build
// suffix (a release candidate of 2.10.0 has 2.10's features).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
