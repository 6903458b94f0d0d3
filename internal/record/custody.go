package record

import (
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// CustodySchema is the custody document's schema name.
const CustodySchema = "nats_sinks.custody.v1"

// Custody returns the custody document of c in canonical key order, or nil
// (JSON null) when c is nil: custody disabled.
func Custody(c *sink.Custody) any {
	if c == nil {
		return nil
	}
	return jsonx.Object{
		{Key: "algorithm", Value: c.Algorithm},
		{Key: "hash_input_format", Value: "canonical-json"},
		{Key: "hash_metadata", Value: c.HashMetadata},
		{Key: "hash_payload", Value: c.HashPayload},
		{Key: "key_id", Value: nullString(c.KeyID)},
		{Key: "metadata_hash", Value: nullString(c.MetadataHash)},
		{Key: "payload_hash", Value: nullString(c.PayloadHash)},
		{Key: "previous_record_hash", Value: nullString(c.PreviousRecordHash)},
		{Key: "privacy", Value: "hashes_are_not_encryption"},
		{Key: "record_hash", Value: c.RecordHash},
		{Key: "schema", Value: CustodySchema},
		{Key: "schema_version", Value: 1},
	}
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// appendCustody writes the custody document of c (or null) in order o.
func appendCustody(dst []byte, c *sink.Custody, f jsonx.Flavour, o jsonx.KeyOrder) []byte {
	if c == nil {
		return append(dst, "null"...)
	}
	out, err := jsonx.AppendCanonical(dst, jsonx.Marshal(Custody(c), f), f, o)
	if err != nil {
		panic("record: custody document does not re-encode: " + err.Error())
	}
	return out
}
