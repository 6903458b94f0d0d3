// Package spoolfile is the on-disk format of the edge spool: one wrapper
// file per message, named by the SHA-256 of the message's core idempotency
// key, holding the spool record in plaintext or encrypted (docs/spool.md).
// The spool sink writes these files and replay-spool reads them; both go
// through this package so that the two sides cannot drift apart, and the
// format stays byte-compatible with upstream's 0.4 spool.
//
// Encode and ParseWrapper are pure; dir.go holds the directory operations
// (durable placement, usage, listing, the replay lock).
package spoolfile

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema names and the file name suffix.
const (
	WrapperSchema = "nats_sinks.spool.wrapper.v1"
	RecordSchema  = "nats_sinks.spool.record.v1"
	// Suffix ends every spool file name; usage and replay count only
	// regular files with it.
	Suffix = ".spool.json"
)

// Name returns the file name of the record whose core idempotency key is
// key: 64 lower-case hex digits of its SHA-256 and Suffix. Listings show no
// subject, message id or payload text.
func Name(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]) + Suffix
}

// EpochNS converts t, truncated to microseconds, to the epoch-nanosecond
// integer upstream writes: it derived these fields from float seconds, so
// ns = int64(float64(µs) / 1e6 * 1e9), IEEE division, multiplication and
// truncation toward zero. The result is not always a multiple of 1000
// (.250000 s becomes …249999872 ns); the exact float steps are the format.
func EpochNS(t time.Time) int64 {
	us := t.UnixMicro()
	return int64(float64(us) / 1e6 * 1e9)
}

// FromEpochNS reads an epoch-nanosecond field back: t = float64(ns) / 1e9,
// then seconds and microseconds as for a JetStream timestamp (round half to
// even). Times before 2038-01-19 come back to the microsecond EpochNS was
// given; later ones can be 1 µs off, a property of the upstream format.
func FromEpochNS(ns int64) time.Time {
	return record.JetStreamTime(time.Unix(0, ns))
}

// An Encoder turns envelopes into spool files. The zero value writes
// plaintext records with json_or_envelope payloads and no metadata.
type Encoder struct {
	// PayloadMode shapes only payload_preview; replay always sends the
	// original bytes (data_b64).
	PayloadMode record.PayloadMode
	// IncludeMetadata stores the standard metadata document in the record.
	IncludeMetadata bool
	// Pretty lays the wrapper out with two-space indents. An encrypted
	// record's plaintext stays compact.
	Pretty bool
	// Seal, when non-nil, encrypts every record with these settings
	// (Enabled is not consulted). Its Key must be 32 bytes.
	Seal *seal.Settings
	// Random supplies nonces; nil means crypto/rand.
	Random io.Reader
}

// File is one encoded spool file.
type File struct {
	Name string // <sha256 hex>.spool.json
	Key  string // the core idempotency key
	Data []byte // wrapper JSON and one '\n'
}

// Key returns e's core idempotency key and its file name. A message
// without key material fails with a permanent sink.ValidationError.
func Key(e *sink.Envelope) (key, name string, err error) {
	key, err = record.CoreKey(e)
	if err != nil {
		return "", "", err
	}
	return key, Name(key), nil
}

// Encode builds e's spool file, spooled at spooledAt (truncated to
// microseconds). A payload the mode cannot shape is a permanent
// sink.SerializationError, as is a record too large for the cipher.
func (enc Encoder) Encode(e *sink.Envelope, spooledAt time.Time) (File, error) {
	key, name, err := Key(e)
	if err != nil {
		return File{}, err
	}
	p, err := record.NormalisePayload(e, enc.PayloadMode)
	if err != nil {
		return File{}, err
	}
	spooledAt = record.Micro(spooledAt)
	spooledNS := EpochNS(spooledAt)
	rec := Record(e, p, key, enc.IncludeMetadata, spooledAt)
	digest := name[:len(name)-len(Suffix)]
	rank := Rank(e.Priority)
	wrapper := jsonx.Object{{Key: "encrypted", Value: enc.Seal != nil}}
	if enc.Seal != nil {
		plain := append(jsonx.Marshal(rec, jsonx.UTF8), '\n')
		sealed, err := seal.Encrypt(plain, *enc.Seal, enc.Random)
		clear(plain)
		if err != nil {
			return File{}, sink.AsPermanentType(sink.SerializationError, fmt.Errorf("spool record encryption: %w", err))
		}
		if !enc.Pretty && isASCII(enc.Seal.KeyID) {
			// The envelope is canonical compact JSON, and with an ASCII
			// key id its ascii flavour is the utf8 one: splice it in as is
			// instead of parsing and encoding it again (a tenth of the
			// sink's CPU). TestSplicedWrapper pins the equivalence.
			return File{Name: name, Key: key, Data: splice(sealed, digest, rank, spooledNS)}, nil
		}
		env, err := jsonx.ParseSorted(sealed)
		if err != nil { // unreachable: seal writes canonical JSON
			return File{}, fmt.Errorf("spool record encryption envelope: %w", err)
		}
		wrapper = append(wrapper, jsonx.Member{Key: "encrypted_record", Value: env})
	}
	wrapper = append(wrapper,
		jsonx.Member{Key: "idempotency_key_sha256", Value: digest},
		jsonx.Member{Key: "priority_rank", Value: rank},
	)
	if enc.Seal == nil {
		wrapper = append(wrapper, jsonx.Member{Key: "record", Value: rec})
	}
	wrapper = append(wrapper,
		jsonx.Member{Key: "schema", Value: WrapperSchema},
		jsonx.Member{Key: "schema_version", Value: 1},
		jsonx.Member{Key: "spooled_at_epoch_ns", Value: spooledNS},
	)
	var data []byte
	if enc.Pretty {
		data = jsonx.MarshalPretty(wrapper, jsonx.UTF8)
	} else {
		data = jsonx.Marshal(wrapper, jsonx.UTF8)
	}
	return File{Name: name, Key: key, Data: append(data, '\n')}, nil
}

// splice writes the compact encrypted wrapper around the envelope bytes
// sealed, with the members in canonical order, and the final '\n'.
func splice(sealed []byte, digest string, rank int, spooledNS int64) []byte {
	b := make([]byte, 0, len(sealed)+256)
	b = append(b, `{"encrypted":true,"encrypted_record":`...)
	b = append(b, sealed...)
	b = append(b, `,"idempotency_key_sha256":"`...)
	b = append(b, digest...)
	b = append(b, `","priority_rank":`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	b = append(b, `,"schema":"`+WrapperSchema+`","schema_version":1,"spooled_at_epoch_ns":`...)
	b = strconv.AppendInt(b, spooledNS, 10)
	return append(b, "}\n"...)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Record returns the nats_sinks.spool.record.v1 document of e with payload
// p and core key key, spooled at spooledAt (µs precision), members in
// canonical order. The metadata document has stored_at = spooledAt and no
// custody key; envelope custody is always null (custody is computed when a
// replay target enables it, not stored in the spool).
func Record(e *sink.Envelope, p record.Payload, key string, includeMetadata bool, spooledAt time.Time) jsonx.Object {
	var meta any
	if includeMetadata {
		meta = record.Metadata(e, spooledAt, false)
	}
	info := p.Info() // original_format, sha256, size_bytes, wrapped
	preview := jsonx.Object{info[0], info[1], info[2], {Key: "value", Value: p.Value}, info[3]}
	return jsonx.Object{
		{Key: "envelope", Value: envelopeObject(e)},
		{Key: "idempotency_key", Value: key},
		{Key: "metadata", Value: meta},
		{Key: "payload_preview", Value: preview},
		{Key: "schema", Value: RecordSchema},
		{Key: "schema_version", Value: 1},
		{Key: "spooled_at_epoch_ns", Value: EpochNS(spooledAt)},
	}
}

// envelopeObject is the record's "envelope": the envelope fields as the
// sink received them. Payload presence is not stored; replay derives it
// from headers and data again.
func envelopeObject(e *sink.Envelope) jsonx.Object {
	labels := record.Labels(e)
	var redelivered any
	if r, known := e.Redelivered(); known {
		redelivered = r
	}
	var pending any
	if e.Pending >= 0 {
		pending = e.Pending
	}
	var received, timestamp any
	if !e.ReceivedAt.IsZero() {
		received = EpochNS(e.ReceivedAt)
	}
	if !e.Timestamp.IsZero() {
		timestamp = EpochNS(record.JetStreamTime(e.Timestamp))
	}
	return jsonx.Object{
		{Key: "classification", Value: str(e.Classification)},
		{Key: "consumer", Value: str(e.Consumer)},
		{Key: "consumer_sequence", Value: seq(e.ConsumerSequence)},
		{Key: "custody", Value: nil},
		{Key: "data_b64", Value: base64.StdEncoding.EncodeToString(e.Data)},
		{Key: "domain", Value: str(e.Domain)},
		{Key: "headers", Value: record.Headers(e)},
		{Key: "labels", Value: labels},
		{Key: "labels_string", Value: record.JoinLabels(labels, ";")},
		{Key: "message_id", Value: str(e.MessageID)},
		{Key: "mission_metadata", Value: nil},
		{Key: "pending", Value: pending},
		{Key: "priority", Value: str(e.Priority)},
		{Key: "received_at_epoch_ns", Value: received},
		{Key: "redelivered", Value: redelivered},
		{Key: "reply", Value: str(e.Reply)},
		{Key: "stream", Value: str(e.Stream)},
		{Key: "stream_sequence", Value: seq(e.StreamSequence)},
		{Key: "subject", Value: e.Subject},
		{Key: "timestamp_epoch_ns", Value: timestamp},
	}
}

func str(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func seq(n uint64) any {
	if n == 0 {
		return nil
	}
	return n
}
