package spoolfile

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/metadata"
	"github.com/nats-sinks/nats-sink/sink"
)

// NoRank is the rank of a wrapper whose priority_rank is not an integer:
// it drains after every valid one.
const NoRank = 999

// A Wrapper is a parsed spool file, checked only as far as planning needs:
// it is a JSON object. Envelope checks and unwraps the rest.
type Wrapper struct {
	Name string
	// Rank is priority_rank when it is a JSON integer, else NoRank.
	Rank int64
	// SpooledAtNS is spooled_at_epoch_ns when it is a JSON integer, else 0.
	SpooledAtNS int64

	doc map[string]any
}

// ParseWrapper parses the bytes of the spool file name. A file that is not
// strict UTF-8 JSON, or not an object, fails with the text replay prints.
func ParseWrapper(name string, data []byte) (*Wrapper, error) {
	v, err := jsonx.Parse(data)
	if err != nil {
		return nil, &NotWrapperError{"spool file " + name + " is not a valid wrapper"}
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, &NotWrapperError{"spool file " + name + " wrapper must be a JSON object"}
	}
	w := &Wrapper{Name: name, Rank: NoRank, doc: doc}
	if n, ok := integer(doc["priority_rank"]); ok {
		w.Rank = n
	}
	if n, ok := integer(doc["spooled_at_epoch_ns"]); ok {
		w.SpooledAtNS = n
	}
	return w, nil
}

// A NotWrapperError is ParseWrapper's failure: the file is not a JSON
// object at all (foreign or truncated).
type NotWrapperError struct{ msg string }

func (e *NotWrapperError) Error() string { return e.msg }

// integer returns v as an int64 when it is a JSON integer, clamping values
// beyond int64 (they only order plans).
func integer(v any) (int64, bool) {
	s, ok := v.(jsonx.Integer)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		if strings.HasPrefix(string(s), "-") {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return n, true
}

// Keys decrypts spool records. The configured key is used only for records
// whose envelope names the configured algorithm and key id (upstream's
// checks); Extra keys, selected by key id, serve records written before a
// key rotation and accept either algorithm.
type Keys struct {
	Algorithm string // normalised, e.g. aes-256-gcm
	KeyID     string
	Key       []byte // nil when no key is configured
	Extra     map[string][]byte
}

// Errors of the key checks made before decryption (upstream's texts).
var (
	ErrAlgorithmMismatch = errors.New("encrypted payload algorithm does not match configuration")
	ErrKeyIDMismatch     = errors.New("encrypted payload key_id does not match configuration")
)

// Envelope checks the rest of the wrapper, decrypts the record when it is
// encrypted, checks the record and rebuilds the envelope replay sends
// (ReceivedAt of a record without one is now).
func (w *Wrapper) Envelope(k Keys, now time.Time) (*sink.Envelope, error) {
	rec, err := w.record(k)
	if err != nil {
		return nil, err
	}
	if s, _ := rec["schema"].(string); s != RecordSchema {
		return nil, errors.New("spool record schema is not supported")
	}
	if v, _ := rec["schema_version"].(jsonx.Integer); v != "1" {
		return nil, errors.New("spool record version is not supported")
	}
	env, ok := rec["envelope"].(map[string]any)
	if !ok {
		return nil, errors.New("spool record envelope must be an object")
	}
	return rebuild(env, now)
}

// record returns the wrapper's record object, decrypted when needed.
func (w *Wrapper) record(k Keys) (map[string]any, error) {
	if s, _ := w.doc["schema"].(string); s != WrapperSchema {
		return nil, errors.New("spool wrapper schema is not supported")
	}
	if v, _ := w.doc["schema_version"].(jsonx.Integer); v != "1" {
		return nil, errors.New("spool wrapper version is not supported")
	}
	encrypted, ok := w.doc["encrypted"].(bool)
	if !ok {
		return nil, errors.New("spool wrapper encrypted flag must be true or false")
	}
	if !encrypted {
		rec, ok := w.doc["record"].(map[string]any)
		if !ok {
			return nil, errors.New("plaintext spool wrapper is missing record")
		}
		return rec, nil
	}
	sealed, ok := w.doc["encrypted_record"].(map[string]any)
	if !ok {
		return nil, errors.New("encrypted spool wrapper is missing encrypted_record")
	}
	plain, err := k.decrypt(sealed)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	v, err := jsonx.Parse(plain)
	if err != nil {
		return nil, errors.New("spool record is not valid JSON")
	}
	rec, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("spool record root must be a JSON object")
	}
	return rec, nil
}

// decrypt opens the encryption envelope object sealed.
func (k Keys) decrypt(sealed map[string]any) ([]byte, error) {
	doc := jsonx.Marshal(sealed, jsonx.ASCII)
	key := seal.Key{Algorithm: k.Algorithm}
	if env, ok := sealed[seal.EnvelopeKey].(map[string]any); ok {
		alg, _ := env["algorithm"].(string)
		id, _ := env["key_id"].(string)
		if extra, ok := k.Extra[id]; ok {
			key = seal.Key{ID: id}
			copy(key.Secret[:], extra)
		} else {
			if alg != k.Algorithm {
				return nil, ErrAlgorithmMismatch
			}
			if id != k.KeyID {
				return nil, ErrKeyIDMismatch
			}
			if k.Key == nil {
				return nil, fmt.Errorf("key_id %q: %w", id, seal.ErrUnknownKey)
			}
			copy(key.Secret[:], k.Key)
		}
	}
	// Without an envelope object, Decrypt reports the data-shapes text.
	plain, err := seal.Decrypt(doc, seal.FixedKeyRing(key))
	clear(key.Secret[:])
	return plain, err
}

// rebuild turns a stored envelope object into the envelope replay writes:
// the stored fields, times read back from their epoch-ns form, message id
// as stored (or derived from headers), headers and labels normalised again,
// payload presence derived from headers and data, delivery count unknown.
func rebuild(env map[string]any, now time.Time) (*sink.Envelope, error) {
	r := fieldReader{env: env}
	e := &sink.Envelope{Pending: -1}
	// Checked in the documented order: the first problem is reported.
	e.Subject = r.subject()
	e.Headers = r.headers()
	labels := r.labels()
	e.Data = r.data()
	e.StreamSequence = r.seq("stream_sequence")
	e.ConsumerSequence = r.seq("consumer_sequence")
	if p, ok := r.count("pending"); ok {
		e.Pending = p
	}
	ts, hasTS := r.epochNS("timestamp_epoch_ns")
	received, hasReceived := r.epochNS("received_at_epoch_ns")
	r.boolean("redelivered")
	e.Stream = r.str("stream")
	e.Consumer = r.str("consumer")
	e.Domain = r.str("domain")
	e.MessageID = r.str("message_id")
	e.Priority = r.str("priority")
	e.Classification = r.str("classification")
	r.str("labels_string")
	e.Reply = r.str("reply")
	r.object("mission_metadata")
	r.object("custody")
	if r.err != nil {
		return nil, r.err
	}
	if hasTS {
		e.Timestamp = FromEpochNS(ts)
	}
	if hasReceived {
		e.ReceivedAt = FromEpochNS(received)
	} else {
		e.ReceivedAt = now.UTC().Truncate(time.Microsecond)
	}
	if e.MessageID == "" {
		e.MessageID = messageID(e.Headers)
	}
	e.Labels = metadata.NormaliseLabels(labels...)
	e.Payload = intake.Presence(e.Headers, len(e.Data))
	return e, nil
}

// messageID is the envelope rule: the first non-empty message-id header.
func messageID(h sink.Headers) string {
	for _, name := range [...]string{"Nats-Msg-Id", "Nats-Message-Id", "message-id"} {
		if v, ok := h.Get(name); ok && v != "" {
			return v
		}
	}
	return ""
}

// fieldReader reads envelope fields, keeping the first type error.
type fieldReader struct {
	env map[string]any
	err error
}

func (r *fieldReader) fail(field, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("spool record field %s must be %s", field, want)
	}
}

func (r *fieldReader) subject() string {
	s, ok := r.env["subject"].(string)
	if !ok || s == "" {
		r.fail("subject", "a non-empty string")
	}
	return s
}

func (r *fieldReader) headers() sink.Headers {
	m, ok := r.env["headers"].(map[string]any)
	if !ok {
		r.fail("headers", "an object of strings")
		return sink.Headers{}
	}
	raw := make(map[string][]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			r.fail("headers", "an object of strings")
			return sink.Headers{}
		}
		raw[k] = []string{s}
	}
	return intake.NormaliseHeaders(raw)
}

func (r *fieldReader) data() []byte {
	s, ok := r.env["data_b64"].(string)
	if !ok {
		r.fail("data_b64", "a base64 string")
		return nil
	}
	b, err := strictBase64(s)
	if err != nil {
		r.fail("data_b64", "a base64 string")
	}
	return b
}

// str reads a string-or-null field; null is "".
func (r *fieldReader) str(field string) string {
	switch v := r.env[field].(type) {
	case nil:
		return ""
	case string:
		return v
	}
	r.fail(field, "a string or null")
	return ""
}

func (r *fieldReader) seq(field string) uint64 {
	n, _ := r.count(field)
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// count reads a non-negative integer or null; ok is false for null.
func (r *fieldReader) count(field string) (int64, bool) {
	v := r.env[field]
	if v == nil {
		return -1, false
	}
	s, ok := v.(jsonx.Integer)
	n, err := strconv.ParseInt(string(s), 10, 64)
	if !ok || err != nil || n < 0 {
		r.fail(field, "a non-negative integer or null")
		return -1, false
	}
	return n, true
}

func (r *fieldReader) epochNS(field string) (int64, bool) {
	v := r.env[field]
	if v == nil {
		return 0, false
	}
	s, ok := v.(jsonx.Integer)
	n, err := strconv.ParseInt(string(s), 10, 64)
	if !ok || err != nil {
		r.fail(field, "an integer or null")
		return 0, false
	}
	return n, true
}

func (r *fieldReader) boolean(field string) {
	switch r.env[field].(type) {
	case nil, bool:
		return
	}
	r.fail(field, "a boolean or null")
}

func (r *fieldReader) labels() []string {
	switch v := r.env["labels"].(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, 0, len(v))
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				r.fail("labels", "a list of strings or null")
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	r.fail("labels", "a list of strings or null")
	return nil
}

func (r *fieldReader) object(field string) {
	switch r.env[field].(type) {
	case nil, map[string]any:
		return
	}
	r.fail(field, "an object or null")
}

// strictBase64 decodes standard base64 with padding and nothing else (Go's
// decoder skips CR and LF; upstream's validate=True refuses them).
func strictBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("not strict base64")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}
