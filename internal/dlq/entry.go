package dlq

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/subject"
)

// NotRecord is the error text of an entry whose body is not a JSON object.
// Such an entry is listed and shown, but never redriven.
const NotRecord = "(body is not a DLQ record)"

// Payload states of an entry, the PAYLOAD column of `dlq list`.
const (
	PayloadYes     = "yes"     // payload_base64 present
	PayloadOmitted = "omitted" // payload_unavailable_reason present (headers-only consumer)
	PayloadNo      = "no"      // neither: include_payload was false
)

// An Entry is one message read back from the DLQ subject: its place in the
// DLQ stream, the body's fields (docs/formats.md#dlq-body) and, where the body
// lacks one, the value of the DLQ headers Build sets (original subject,
// stream, error type). Bodies of nats-sinks 0.3.0 (no payload object) are
// read the same way.
type Entry struct {
	// Seq and Stored are the DLQ message's stream sequence and stored time.
	Seq    uint64
	Stored time.Time
	// Header holds the DLQ message's own headers; Body its bytes.
	Header map[string][]string
	Body   []byte

	// Record is false when the body is not a JSON object (NotRecord); the
	// fields below then come from the headers only.
	Record bool
	// Doc is the parsed body, nil unless Record.
	Doc map[string]any

	Subject        string // original subject; "" unknown
	Stream         string // original stream; "" unknown
	StreamSequence uint64 // original stream sequence; 0 unknown
	Consumer       string
	MessageID      string
	IdempotencyKey string
	ErrorType      string
	// Error is the body's error text; HasError is false when absent or null.
	Error    string
	HasError bool

	// PayloadBase64 is the body's payload_base64 (HasPayload false when
	// absent); Unavailable its payload_unavailable_reason.
	PayloadBase64 string
	HasPayload    bool
	Unavailable   string
	// Headers is the body's headers map (the original message's normalised
	// headers); HasHeaders false when the body has none (include_headers
	// false).
	Headers    map[string]string
	HasHeaders bool
}

// Read returns the entry for a DLQ message.
func Read(seq uint64, stored time.Time, header map[string][]string, body []byte) *Entry {
	e := &Entry{Seq: seq, Stored: stored, Header: header, Body: body}
	if doc, err := jsonx.Parse(body); err == nil {
		if m, ok := doc.(map[string]any); ok {
			e.Record, e.Doc = true, m
		}
	}
	if e.Record {
		d := e.Doc
		e.Subject = str(d["subject"])
		e.Stream = str(d["stream"])
		e.StreamSequence = uintOf(d["stream_sequence"])
		e.Consumer = str(d["consumer"])
		e.MessageID = str(d["message_id"])
		e.IdempotencyKey = str(d["idempotency_key"])
		e.ErrorType = str(d["error_type"])
		if s, ok := d["error"].(string); ok {
			e.Error, e.HasError = s, true
		}
		if s, ok := d["payload_base64"].(string); ok {
			e.PayloadBase64, e.HasPayload = s, true
		}
		e.Unavailable = str(d["payload_unavailable_reason"])
		if _, present := d["payload_unavailable_reason"]; present && e.Unavailable == "" && !e.HasPayload {
			e.Unavailable = "payload_omitted"
		}
		if h, ok := d["headers"].(map[string]any); ok {
			e.HasHeaders = true
			e.Headers = make(map[string]string, len(h))
			for k, v := range h {
				if s, ok := v.(string); ok {
					e.Headers[k] = s
				}
			}
		}
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := headerValue(header, n); v != "" {
				return v
			}
		}
		return ""
	}
	if e.Subject == "" {
		e.Subject = first(HeaderXSubject, HeaderOriginalSubject)
	}
	if e.Stream == "" {
		e.Stream = first(HeaderXStream)
	}
	if e.ErrorType == "" {
		e.ErrorType = first(HeaderErrorType)
	}
	return e
}

// PayloadState returns PayloadYes, PayloadOmitted or PayloadNo.
func (e *Entry) PayloadState() string {
	switch {
	case e.HasPayload:
		return PayloadYes
	case e.Unavailable != "":
		return PayloadOmitted
	}
	return PayloadNo
}

// ErrorText returns the error shown for the entry: NotRecord for a body
// that is not a DLQ record, else the body's error; ok is false when there
// is none.
func (e *Entry) ErrorText() (text string, ok bool) {
	if !e.Record {
		return NotRecord, true
	}
	return e.Error, e.HasError
}

// Short returns s for a table cell: control characters as spaces, at most
// n characters, with "…" when cut.
func Short(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s { // invalid UTF-8 reads as U+FFFD
		if count == n {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}

// A Filter selects entries; every set field must hold (`dlq list` filters).
type Filter struct {
	// Subject is a pattern the original subject must match.
	Subject string
	// Reasons are error types, any of which must equal the entry's.
	Reasons []string
	// Consumer must equal the body's consumer.
	Consumer string
	// Since and Until bound the stored time: Since ≤ stored < Until.
	Since, Until time.Time
}

// Match reports whether e passes f.
func (f *Filter) Match(e *Entry) bool {
	if f.Subject != "" && (e.Subject == "" || !subject.Match(f.Subject, e.Subject)) {
		return false
	}
	if len(f.Reasons) > 0 && !slices.Contains(f.Reasons, e.ErrorType) {
		return false
	}
	if f.Consumer != "" && e.Consumer != f.Consumer {
		return false
	}
	if !f.Since.IsZero() && e.Stored.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !e.Stored.Before(f.Until) {
		return false
	}
	return true
}

// headerValue is the case-insensitive header lookup of docs/formats.md#metadata-document:
// the canonical spelling when present, else the byte-wise smallest name
// equal to it ignoring ASCII case; the last value.
func headerValue(h map[string][]string, name string) string {
	v, _ := lookup(h, name)
	return v
}

func lookup[V string | []string](h map[string]V, name string) (string, bool) {
	best, found := "", false
	for k := range h {
		if !strings.EqualFold(k, name) {
			continue
		}
		if k == name {
			best, found = k, true
			break
		}
		if !found || k < best {
			best, found = k, true
		}
	}
	if !found {
		return "", false
	}
	switch v := any(h[best]).(type) {
	case string:
		return v, true
	case []string:
		if len(v) == 0 {
			return "", true
		}
		return v[len(v)-1], true
	}
	return "", false
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func uintOf(v any) uint64 {
	i, ok := v.(jsonx.Integer)
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(string(i), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
