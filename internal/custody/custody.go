// Package custody computes and verifies chain-of-custody documents
// (docs/integrity.md#chain-of-custody): hashes of the canonical payload,
// of the metadata document and of a record binding both to subject,
// stream, stream sequence and message id, optionally linked to the record
// the producer names as previous. Hashing is never keyed: a hash proves the
// record did not change after receipt, not who wrote it.
package custody

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-sinks/nats-sink/internal/authenticity"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema is the document's "schema" member.
const Schema = "nats_sinks.custody.v1"

// DefaultPreviousHashHeader names the chain-link header.
const DefaultPreviousHashHeader = "Nats-Sinks-Previous-Custody-Hash"

// Settings is a loaded custody section.
type Settings struct {
	Algorithm           string // "sha256" or "sha512"
	KeyID               string // "" = null
	HashPayload         bool
	HashMetadata        bool
	IncludePreviousHash bool
	PreviousHashHeader  string
	MaxHashInputBytes   int
}

// ErrPreviousHash is the failure for a malformed chain-link header.
var ErrPreviousHash = errors.New("custody previous_record_hash must be a sha256 or sha512 hexadecimal digest")

func tooLarge(part string) error {
	return fmt.Errorf("custody %s hash input exceeds custody max_hash_input_bytes", part)
}

// Compute returns e's custody document. Its errors are permanent
// validation failures (sink.Permanent): a malformed chain link or an input
// over the size limit.
//
// The three hash inputs are written straight into one pooled buffer, in
// turn, and hashed from there: the payload by record.AppendPayload (no
// tree), the metadata document by record.AppendMetadata (no tree, then the
// two stored_at members cut from its end), the record input member by
// member. Building the trees and encoding them, as MetadataInput and
// RecordInput describe the inputs, cost about as much again as building
// the stored record; the bytes are the same (TestFastInputs).
func (s *Settings) Compute(e *sink.Envelope) (*sink.Custody, error) {
	c := &sink.Custody{Algorithm: s.Algorithm, KeyID: s.KeyID, HashPayload: s.HashPayload, HashMetadata: s.HashMetadata}
	if s.IncludePreviousHash {
		prev, err := PreviousHash(e, s.PreviousHashHeader)
		if err != nil {
			return nil, invalid(err)
		}
		c.PreviousRecordHash = prev
	}
	buf := inputs.Get().(*[]byte)
	defer releaseInput(buf)
	if s.HashPayload {
		in, err := record.AppendPayload((*buf)[:0], e, record.JSONOrEnvelope, jsonx.UTF8, jsonx.CanonicalOrder)
		if err != nil {
			return nil, invalid(fmt.Errorf("custody payload: %w", err))
		}
		*buf = in
		if s.over(in) {
			return nil, invalid(tooLarge("payload"))
		}
		c.PayloadHash = s.sum(in)
	}
	if s.HashMetadata {
		in := AppendMetadataInput((*buf)[:0], e)
		*buf = in
		if s.over(in) {
			return nil, invalid(tooLarge("metadata"))
		}
		c.MetadataHash = s.sum(in)
	}
	in := AppendRecordInput((*buf)[:0], c, e.Subject, e.MessageID, e.Stream, e.StreamSequence)
	*buf = in
	if s.over(in) {
		return nil, invalid(tooLarge("record"))
	}
	c.RecordHash = s.sum(in)
	return c, nil
}

// inputs holds the buffers Compute writes hash inputs into. A metadata
// document is 1.5–3 KB; a buffer grown past maxPooledInput by a large
// payload is left to the GC.
var inputs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledInput = 256 << 10

func releaseInput(b *[]byte) {
	if cap(*b) <= maxPooledInput {
		inputs.Put(b)
	}
}

func (s *Settings) over(in []byte) bool {
	return s.MaxHashInputBytes > 0 && len(in) > s.MaxHashInputBytes
}

func (s *Settings) sum(in []byte) string { return Sum(s.Algorithm, in) }

// Sum returns the lower-case hex digest of in under alg ("sha512", else
// SHA-256).
func Sum(alg string, in []byte) string {
	if alg == "sha512" {
		d := sha512.Sum512(in)
		return hex.EncodeToString(d[:])
	}
	d := sha256.Sum256(in)
	return hex.EncodeToString(d[:])
}

// PreviousHash reads the chain link from header: trimmed, absent or empty
// is "", otherwise 64 or 128 hex digits, returned lower-cased.
func PreviousHash(e *sink.Envelope, header string) (string, error) {
	v, ok := e.Headers.Get(header)
	if !ok {
		return "", nil
	}
	v = authenticity.Trim(v)
	if v == "" {
		return "", nil
	}
	if !hexDigest(v) {
		return "", ErrPreviousHash
	}
	return strings.ToLower(v), nil
}

func hexDigest(s string) bool {
	if len(s) != 64 && len(s) != 128 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// MetadataInput is the metadata document hashed for metadata_hash: the
// standard metadata stored at the receive time, without the two stored_at
// members and without custody.
func MetadataInput(e *sink.Envelope) jsonx.Object {
	doc := record.Metadata(e, e.ReceivedAt, false)
	out := make(jsonx.Object, len(doc))
	for i, m := range doc {
		out[i] = m
		if m.Key != "timestamps" {
			continue
		}
		ts := m.Value.(jsonx.Object)
		kept := make(jsonx.Object, 0, len(ts))
		for _, t := range ts {
			if t.Key != "stored_at" && t.Key != "stored_at_epoch_ns" {
				kept = append(kept, t)
			}
		}
		out[i] = jsonx.Member{Key: m.Key, Value: kept}
	}
	return out
}

// storedAtTail begins the last two members of the metadata document:
// "timestamps" is its last member, and "stored_at" and
// "stored_at_epoch_ns" sort last in it.
var (
	storedAtTail   = []byte(`,"stored_at":`)
	storedAtNSTail = []byte(`,"stored_at_epoch_ns":`)
)

// AppendMetadataInput appends the bytes of MetadataInput(e) in the utf8
// flavour to dst, as jsonx.Marshal writes them (TestFastInputs).
//
// It writes the stored metadata document with stored_at := received_at
// (record.AppendMetadata) and cuts the document's tail, the two stored_at
// members, which are the last members of its last object: what follows
// them is their scalar values and "}}". Should the document not end so (a
// change of the document's shape), it falls back to encoding
// MetadataInput.
func AppendMetadataInput(dst []byte, e *sink.Envelope) []byte {
	start := len(dst)
	dst = record.AppendMetadata(dst, e, e.ReceivedAt, false, jsonx.UTF8, jsonx.CanonicalOrder)
	doc := dst[start:]
	i := bytes.LastIndex(doc, storedAtTail)
	if i < 0 || !bytes.HasSuffix(doc, []byte("}}")) || bytes.Index(doc[i:], storedAtNSTail) < 0 ||
		bytes.IndexByte(doc[i+len(storedAtTail):], '}') != len(doc)-i-len(storedAtTail)-2 {
		return jsonx.Append(dst[:start], MetadataInput(e), jsonx.UTF8)
	}
	return append(dst[:start+i], "}}"...)
}

// RecordInput is the canonical input of record_hash.
func RecordInput(c *sink.Custody, subject, messageID, stream string, seq uint64) []byte {
	return AppendRecordInput(nil, c, subject, messageID, stream, seq)
}

// AppendRecordInput appends RecordInput's bytes to dst: the eleven members
// in key order, as jsonx.Marshal writes the object (TestFastInputs).
func AppendRecordInput(dst []byte, c *sink.Custody, subject, messageID, stream string, seq uint64) []byte {
	str := func(dst []byte, key, v string) []byte {
		dst = append(dst, key...)
		if v == "" {
			return append(dst, "null"...)
		}
		return jsonx.AppendString(dst, v, jsonx.UTF8)
	}
	dst = str(dst, `{"algorithm":`, c.Algorithm)
	dst = str(dst, `,"key_id":`, c.KeyID)
	dst = str(dst, `,"message_id":`, messageID)
	dst = str(dst, `,"metadata_hash":`, c.MetadataHash)
	dst = str(dst, `,"payload_hash":`, c.PayloadHash)
	dst = str(dst, `,"previous_record_hash":`, c.PreviousRecordHash)
	dst = append(dst, `,"schema":"`+Schema+`","schema_version":1`...)
	dst = str(dst, `,"stream":`, stream)
	dst = append(dst, `,"stream_sequence":`...)
	if seq == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendUint(dst, seq, 10)
	}
	// The subject is always a string, even an empty one.
	dst = append(dst, `,"subject":`...)
	dst = jsonx.AppendString(dst, subject, jsonx.UTF8)
	return append(dst, '}')
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// invalid marks err as a permanent ValidationError of one message.
func invalid(err error) error { return sink.AsPermanentType(sink.ValidationError, err) }
