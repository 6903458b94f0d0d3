// Package record builds the byte-compatible documents of spec data-shapes:
// times (§1.1), the standard metadata document (§3), payload normalisation
// (§4), idempotency keys and file stems (§5, §7.1) and the file record (§7).
// Pure functions, no I/O.
//
// Documents are jsonx trees (map[string]any, nil for null) ready for
// jsonx.Marshal. They share the envelope's headers map and labels slice
// instead of copying them per message, so they are read-only, like the
// envelope itself.
package record

import (
	"slices"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// Message-creation sources (data-shapes §3).
const (
	SourceNatsTimeStamp = "nats_time_stamp"
	SourceJetStream     = "jetstream_timestamp"
	SourceMissing       = "missing"
)

// reservedHeaders are stored under this canonical spelling when present in
// any case (data-shapes §3).
var reservedHeaders = [...]string{
	"Nats-Msg-Id", "Nats-Expected-Stream", "Nats-Expected-Last-Msg-Id",
	"Nats-Expected-Last-Sequence", "Nats-Expected-Last-Subject-Sequence",
	"Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Rollup", "Nats-TTL",
	"Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Last-Sequence",
	"Nats-Time-Stamp", "Nats-Num-Pending", "Nats-UpTo-Sequence",
	"Nats-Stream-Source", "Nats-Trace-Dest", "Nats-Trace-Only", "Nats-Trace-Hop",
	"Nats-Trace-Origin-Account", "Nats-Schedule", "Nats-Schedule-TTL",
	"Nats-Schedule-Target", "Nats-Schedule-Time-Zone", "traceparent",
	"Accept-Encoding",
}

// Created is a message's creation time as resolved by data-shapes §3.
type Created struct {
	Time      time.Time // zero when missing
	Source    string    // SourceNatsTimeStamp, SourceJetStream or SourceMissing
	Malformed bool      // Nats-Time-Stamp present but not parseable
	Header    string    // raw Nats-Time-Stamp
	HasHeader bool
}

// CreatedAt resolves the creation time of e: a parseable Nats-Time-Stamp,
// else the JetStream timestamp (µs, §1.1), else missing. Kafka's record
// timestamp and the freshness metrics use it too.
func CreatedAt(e *sink.Envelope) Created {
	var c Created
	c.Header, c.HasHeader = e.Headers.Get("Nats-Time-Stamp")
	if c.HasHeader {
		if t, ok := ParseTimeStamp(c.Header); ok {
			c.Time, c.Source = t, SourceNatsTimeStamp
			return c
		}
		c.Malformed = true
	}
	if !e.Timestamp.IsZero() {
		c.Time, c.Source = JetStreamTime(e.Timestamp), SourceJetStream
		return c
	}
	c.Source = SourceMissing
	return c
}

// Metadata returns the standard metadata document v1 (§3) for e, stored at
// storedAt. withCustody adds the top-level "custody": null key (SQL sinks,
// S3 envelope).
func Metadata(e *sink.Envelope, storedAt time.Time, withCustody bool) map[string]any {
	received := Micro(e.ReceivedAt)
	stored := Micro(storedAt)
	created := CreatedAt(e)

	js := map[string]any{
		"stream":             str(e.Stream),
		"consumer":           str(e.Consumer),
		"domain":             str(e.Domain),
		"stream_sequence":    seq(e.StreamSequence),
		"consumer_sequence":  seq(e.ConsumerSequence),
		"redelivered":        redelivered(e),
		"pending":            pending(e.Pending),
		"timestamp":          nil,
		"timestamp_epoch_ns": nil,
	}
	var jsNS any
	if !e.Timestamp.IsZero() {
		t := JetStreamTime(e.Timestamp)
		jsNS = EpochNS(t)
		js["timestamp"], js["timestamp_epoch_ns"] = ISO(t), jsNS
	}

	var createdNS, ageReceive, ageStore, skew any
	if created.Source != SourceMissing {
		createdNS = EpochNS(created.Time)
		ageReceive = AgeSeconds(received, created.Time)
		ageStore = AgeSeconds(stored, created.Time)
		skew = AgeSeconds(created.Time, received)
	}
	var tsHeader any
	if created.HasHeader {
		tsHeader = created.Header
	}

	doc := map[string]any{
		"metadata_version": 1,
		"subject":          e.Subject,
		"reply":            str(e.Reply),
		"message_id":       str(e.MessageID),
		"message_metadata": map[string]any{
			"priority":       str(e.Priority),
			"classification": str(e.Classification),
			"labels":         Labels(e),
		},
		"mission_metadata": nil,
		"security_labels":  nil,
		"headers":          Headers(e),
		"payload":          PayloadObject(e),
		"nats":             reserved(e.Headers),
		"jetstream":        js,
		"timestamps": map[string]any{
			"message_created_at_epoch_ns":         createdNS,
			"message_created_at_source":           created.Source,
			"message_created_at_header_malformed": created.Malformed,
			"nats_time_stamp":                     tsHeader,
			"jetstream_timestamp_epoch_ns":        jsNS,
			"received_at":                         ISO(received),
			"received_at_epoch_ns":                EpochNS(received),
			"stored_at":                           ISO(stored),
			"stored_at_epoch_ns":                  EpochNS(stored),
		},
		"freshness": map[string]any{
			"event_age_at_receive_seconds":        ageReceive,
			"event_age_at_store_seconds":          ageStore,
			"source_clock_skew_seconds":           skew,
			"message_created_at_source":           created.Source,
			"message_created_at_missing":          created.Source == SourceMissing,
			"message_created_at_header_malformed": created.Malformed,
		},
	}
	if withCustody {
		doc["custody"] = nil
	}
	return doc
}

// PayloadObject returns the "payload" object shared by the metadata
// document (§3) and the DLQ body (§8.1).
func PayloadObject(e *sink.Envelope) map[string]any {
	p := &e.Payload
	var reason, original, header any
	if p.OmittedReason != "" {
		reason = p.OmittedReason
	}
	if p.OriginalSize >= 0 {
		original = p.OriginalSize
	}
	if p.HasSizeHeader {
		header = p.SizeHeader
	}
	return map[string]any{
		"present":                        p.Present,
		"omitted":                        p.Omitted,
		"omitted_reason":                 reason,
		"original_size_bytes":            original,
		"delivered_size_bytes":           len(e.Data),
		"nats_msg_size_header":           header,
		"nats_msg_size_header_malformed": p.SizeHeaderMalformed,
	}
}

// Headers returns the normalised header map of e as a JSON object ({} when
// there are none). The conversion drops the sink.Headers name so that the
// encoder sees a plain map[string]string.
func Headers(e *sink.Envelope) map[string]string {
	if e.Headers == nil {
		return map[string]string{}
	}
	return map[string]string(e.Headers)
}

// Labels returns e's labels as a JSON list ([] when there are none).
func Labels(e *sink.Envelope) []string {
	if e.Labels == nil {
		return []string{}
	}
	return e.Labels
}

// JoinLabels is the scalar storage form of labels (data-shapes §2.4): the
// items joined with sep, or null when there are none.
func JoinLabels(labels []string, sep string) any {
	if len(labels) == 0 {
		return nil
	}
	return strings.Join(labels, sep)
}

// reserved builds the "nats" object: canonical reserved names first, then
// every other header whose name starts with "nats-" in any case, under its
// own spelling unless that exact spelling is already a key.
func reserved(h sink.Headers) map[string]any {
	res := map[string]string{}
	for _, name := range reservedHeaders {
		if v, ok := h.Get(name); ok {
			res[name] = v
		}
	}
	for name, v := range h {
		if len(name) >= 5 && strings.EqualFold(name[:5], "nats-") {
			if _, dup := res[name]; !dup {
				res[name] = v
			}
		}
	}
	present := make([]string, 0, len(res))
	for name := range res {
		present = append(present, name)
	}
	slices.Sort(present)
	return map[string]any{"reserved_headers": res, "reserved_headers_present": present}
}

// str maps the envelope's "" = unknown convention to null.
func str(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// seq maps sequence 0 (unknown; JetStream sequences start at 1) to null.
func seq(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}

func pending(n int64) any {
	if n < 0 {
		return nil
	}
	return n
}

func redelivered(e *sink.Envelope) any {
	r, known := e.Redelivered()
	if !known {
		return nil
	}
	return r
}
