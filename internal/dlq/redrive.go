package dlq

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/subject"
)

// HeaderRedriveSource names the DLQ entry a redriven message came from:
// "<dlq stream>:<dlq seq>".
const HeaderRedriveSource = "Nats-Sinks-Redrive-Source"

// RedriveIDPrefix starts the Nats-Msg-Id of a redriven message that had
// neither its own Nats-Msg-Id nor a message id.
const RedriveIDPrefix = "nats-sinks-redrive:"

// A Refusal is why an entry cannot be redriven. Its text is the reason
// `dlq redrive` prints for the entry; nothing is published for it.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// Unsealer decrypts the payloads of encrypted entries: the payload the DLQ
// holds is what the sink saw, the encryption envelope, and the producer's
// bytes are what a redrive must publish (the runner encrypts them again).
type Unsealer struct {
	// Encrypts reports whether the configuration's encryption policy
	// encrypts subject; nil means it encrypts nothing.
	Encrypts func(subject string) bool
	// Key returns the decryption key for an envelope's key_id, false when
	// no such key is available.
	Key func(keyID string) (seal.Key, bool)
}

// RedriveOptions are the settings of one redrive.
type RedriveOptions struct {
	// DLQStream is the stream holding the entries (for the source header
	// and the last-resort message id).
	DLQStream string
	// To replaces the original subject; "" keeps it.
	To string
	// WithoutHeaders allows entries whose body has no headers map: the
	// message is published with only the headers redrive adds.
	WithoutHeaders bool
	Unseal         Unsealer
}

// A Republish is the message a redrive publishes for one entry.
type Republish struct {
	Subject string
	Data    []byte
	Header  map[string][]string
	// MsgID is the Nats-Msg-Id (also in Header).
	MsgID string
	// ExpectedStream, when set, is sent as Nats-Expected-Stream: the
	// original subject must still land in the original stream.
	ExpectedStream string
	// OriginalStream and OriginalSeq identify the message the entry came
	// from (zero when unknown). A PubAck that reports a duplicate of exactly
	// that message means the original is still inside the stream's
	// duplicate window: the redrive is blocked, not done.
	OriginalStream string
	OriginalSeq    uint64
}

// Redrive builds the message that republishes what JetStream originally
// delivered for e: the producer's bytes (decrypted when the configuration
// encrypts the original subject), the original headers minus the Nats-*
// ones the server or the sink added, and a deterministic Nats-Msg-Id, so
// that a repeated redrive inside the target stream's duplicate window
// publishes nothing twice. An entry that cannot be redriven faithfully
// returns a *Refusal.
func (e *Entry) Redrive(o RedriveOptions) (*Republish, error) {
	if !e.Record {
		return nil, refuse("body is not a DLQ record")
	}
	if !e.HasPayload {
		if e.Unavailable != "" {
			return nil, refuse("payload omitted (%s)", e.Unavailable)
		}
		return nil, refuse("payload not included")
	}
	if !e.HasHeaders && !o.WithoutHeaders {
		return nil, refuse("headers not included")
	}
	target := e.Subject
	if o.To != "" {
		target = o.To
	}
	if target == "" {
		return nil, refuse("no original subject")
	}
	if !subject.IsLiteral(target) {
		return nil, refuse("original subject %q is not a literal subject", target)
	}
	data, err := base64.StdEncoding.Strict().DecodeString(e.PayloadBase64)
	if err != nil {
		return nil, refuse("payload_base64 is not valid base64")
	}
	if data, err = o.Unseal.open(e.Subject, data); err != nil {
		return nil, err
	}

	r := &Republish{Subject: target, Data: data, Header: map[string][]string{},
		OriginalStream: e.Stream, OriginalSeq: e.StreamSequence}
	for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
		if keepHeader(name) {
			r.Header[name] = []string{e.Headers[name]}
		}
	}
	set := func(name, value string) {
		for k := range r.Header {
			if strings.EqualFold(k, name) {
				delete(r.Header, k)
			}
		}
		r.Header[name] = []string{value}
	}
	source := o.DLQStream + ":" + strconv.FormatUint(e.Seq, 10)
	set(HeaderRedriveSource, source)
	switch id, _ := lookup(e.Headers, HeaderMsgID); {
	case id != "":
		r.MsgID = id
	case e.MessageID != "":
		r.MsgID = e.MessageID
	case e.Stream != "" && e.StreamSequence > 0:
		r.MsgID = RedriveIDPrefix + e.Stream + ":" + strconv.FormatUint(e.StreamSequence, 10)
	default:
		r.MsgID = RedriveIDPrefix + source
	}
	set(HeaderMsgID, r.MsgID)
	if target == e.Subject && e.Stream != "" {
		r.ExpectedStream = e.Stream
		set("Nats-Expected-Stream", e.Stream)
	}
	return r, nil
}

// keepHeader reports whether an original header is republished: every
// Nats-* name is the server's or a publish option's (Nats-Msg-Size of a
// headers-only delivery, Nats-Expected-*, Nats-Rollup, …) and is dropped,
// except the producer's Nats-Msg-Id and Nats-Time-Stamp and the
// Nats-Sinks-* metadata headers.
func keepHeader(name string) bool {
	l := strings.ToLower(name)
	if !strings.HasPrefix(l, "nats-") {
		return true
	}
	return l == "nats-msg-id" || l == "nats-time-stamp" || strings.HasPrefix(l, "nats-sinks-")
}

// open returns the bytes to publish for a payload stored for subj.
func (u Unsealer) open(subj string, data []byte) ([]byte, error) {
	encrypts := u.Encrypts != nil && u.Encrypts(subj)
	keyID, envelope := envelopeKeyID(data)
	switch {
	case envelope && encrypts:
		key, ok := seal.Key{}, false
		if u.Key != nil {
			key, ok = u.Key(keyID)
		}
		if !ok {
			return nil, refuse("key %q not available", keyID)
		}
		plain, err := seal.Decrypt(data, seal.FixedKeyRing(key))
		if err != nil {
			return nil, refuse("%v", err)
		}
		return plain, nil
	case envelope:
		// The configuration does not encrypt this subject: the producer
		// itself published an envelope, and that is what it sent.
		return data, nil
	case encrypts:
		return nil, refuse("encryption mismatch: the configuration encrypts %q but the payload is not an encryption envelope", subj)
	}
	return data, nil
}

// envelopeKeyID reports whether data is a nats-sinks encryption envelope
// (a JSON object with an _nats_sinks_encryption object) and its key_id.
func envelopeKeyID(data []byte) (string, bool) {
	if len(data) == 0 || data[0] != '{' && data[0] != ' ' && data[0] != '\n' && data[0] != '\t' && data[0] != '\r' {
		return "", false
	}
	doc, err := jsonx.Parse(data)
	if err != nil {
		return "", false
	}
	root, _ := doc.(map[string]any)
	env, ok := root["_nats_sinks_encryption"].(map[string]any)
	if !ok {
		return "", false
	}
	id, _ := env["key_id"].(string)
	return id, true
}
