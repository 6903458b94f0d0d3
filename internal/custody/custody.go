// Package custody computes and verifies chain-of-custody documents
// (docs/integrity.md#chain-of-custody): hashes of the canonical payload,
// of the metadata document and of a record binding both to subject,
// stream, stream sequence and message id, optionally linked to the record
// the producer names as previous. Hashing is never keyed: a hash proves the
// record did not change after receipt, not who wrote it.
package custody

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"

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
func (s *Settings) Compute(e *sink.Envelope) (*sink.Custody, error) {
	c := &sink.Custody{Algorithm: s.Algorithm, KeyID: s.KeyID, HashPayload: s.HashPayload, HashMetadata: s.HashMetadata}
	if s.IncludePreviousHash {
		prev, err := PreviousHash(e, s.PreviousHashHeader)
		if err != nil {
			return nil, invalid(err)
		}
		c.PreviousRecordHash = prev
	}
	if s.HashPayload {
		p, err := record.NormalisePayload(e, record.JSONOrEnvelope)
		if err != nil {
			return nil, invalid(fmt.Errorf("custody payload: %w", err))
		}
		in := jsonx.Marshal(p.Value, jsonx.UTF8)
		if s.over(in) {
			return nil, invalid(tooLarge("payload"))
		}
		c.PayloadHash = s.sum(in)
	}
	if s.HashMetadata {
		in := jsonx.Marshal(MetadataInput(e), jsonx.UTF8)
		if s.over(in) {
			return nil, invalid(tooLarge("metadata"))
		}
		c.MetadataHash = s.sum(in)
	}
	in := RecordInput(c, e.Subject, e.MessageID, e.Stream, e.StreamSequence)
	if s.over(in) {
		return nil, invalid(tooLarge("record"))
	}
	c.RecordHash = s.sum(in)
	return c, nil
}

func (s *Settings) over(in []byte) bool {
	return s.MaxHashInputBytes > 0 && len(in) > s.MaxHashInputBytes
}

func (s *Settings) sum(in []byte) string { return Sum(s.Algorithm, in) }

// Sum returns the lower-case hex digest of in under alg.
func Sum(alg string, in []byte) string {
	var h hash.Hash
	if alg == "sha512" {
		h = sha512.New()
	} else {
		h = sha256.New()
	}
	h.Write(in)
	return hex.EncodeToString(h.Sum(nil))
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

// RecordInput is the canonical input of record_hash.
func RecordInput(c *sink.Custody, subject, messageID, stream string, seq uint64) []byte {
	var s any
	if seq != 0 {
		s = jsonx.Integer(fmt.Sprint(seq))
	}
	return jsonx.Marshal(jsonx.Object{
		{Key: "algorithm", Value: c.Algorithm},
		{Key: "key_id", Value: orNull(c.KeyID)},
		{Key: "message_id", Value: orNull(messageID)},
		{Key: "metadata_hash", Value: orNull(c.MetadataHash)},
		{Key: "payload_hash", Value: orNull(c.PayloadHash)},
		{Key: "previous_record_hash", Value: orNull(c.PreviousRecordHash)},
		{Key: "schema", Value: Schema},
		{Key: "schema_version", Value: 1},
		{Key: "stream", Value: orNull(stream)},
		{Key: "stream_sequence", Value: s},
		{Key: "subject", Value: subject},
	}, jsonx.UTF8)
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// invalid marks err as a permanent ValidationError of one message.
func invalid(err error) error { return sink.AsPermanentType(sink.ValidationError, err) }
