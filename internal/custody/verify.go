package custody

import (
	"errors"
	"maps"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Verification is the outcome of re-computing one stored record's custody
// hashes from the record alone.
type Verification struct {
	// HasCustody is false when the record carries custody null.
	HasCustody bool
	// RecordHash and PreviousRecordHash are the document's values, for
	// checking chain links across records.
	RecordHash, PreviousRecordHash string
	// Mismatches names each hash that does not match, in document order:
	// payload_hash, metadata_hash, record_hash.
	Mismatches []string
	// Err is set when the record is not a record with a readable custody
	// document.
	Err error
}

// VerifyFileRecord verifies a file-sink (or segments) record: top-level
// custody, payload and metadata.
func VerifyFileRecord(data []byte) Verification {
	v, err := jsonx.Parse(data)
	if err != nil {
		return Verification{Err: err}
	}
	rec, ok := v.(map[string]any)
	if !ok {
		return Verification{Err: errors.New("record is not a JSON object")}
	}
	meta, _ := rec["metadata"].(map[string]any)
	payload, hasPayload := rec["payload"]
	return Verify(rec["custody"], payload, hasPayload, meta, rec)
}

// Verify re-computes the hashes of doc, the custody document of a record
// whose stored payload is payload (hasPayload false when the record does
// not store it) and whose metadata document is meta (nil when not stored;
// a custody member in it is ignored). fallback supplies subject,
// message_id, stream and stream_sequence when meta is nil.
func Verify(doc, payload any, hasPayload bool, meta map[string]any, fallback map[string]any) Verification {
	if doc == nil {
		return Verification{}
	}
	c, ok := doc.(map[string]any)
	if !ok {
		return Verification{Err: errors.New("custody is not an object")}
	}
	out := Verification{HasCustody: true}
	alg, _ := c["algorithm"].(string)
	if alg != "sha256" && alg != "sha512" {
		return Verification{HasCustody: true, Err: errors.New("custody algorithm is not sha256 or sha512")}
	}
	out.RecordHash, _ = c["record_hash"].(string)
	out.PreviousRecordHash, _ = c["previous_record_hash"].(string)

	if want, set := c["payload_hash"].(string); set {
		if !hasPayload || Sum(alg, jsonx.Marshal(payload, jsonx.UTF8)) != want {
			out.Mismatches = append(out.Mismatches, "payload_hash")
		}
	}
	if want, set := c["metadata_hash"].(string); set {
		if meta == nil || Sum(alg, jsonx.Marshal(metadataForHash(meta), jsonx.UTF8)) != want {
			out.Mismatches = append(out.Mismatches, "metadata_hash")
		}
	}
	subject, messageID, stream, seq := fallback["subject"], fallback["message_id"], fallback["stream"], fallback["stream_sequence"]
	if meta != nil {
		subject, messageID = meta["subject"], meta["message_id"]
		if js, ok := meta["jetstream"].(map[string]any); ok {
			stream, seq = js["stream"], js["stream_sequence"]
		}
	}
	in := jsonx.Marshal(map[string]any{
		"algorithm": c["algorithm"], "key_id": c["key_id"], "metadata_hash": c["metadata_hash"],
		"payload_hash": c["payload_hash"], "previous_record_hash": c["previous_record_hash"],
		"schema": c["schema"], "schema_version": c["schema_version"],
		"subject": subject, "message_id": messageID, "stream": stream, "stream_sequence": seq,
	}, jsonx.UTF8)
	if Sum(alg, in) != out.RecordHash {
		out.Mismatches = append(out.Mismatches, "record_hash")
	}
	return out
}

// metadataForHash undoes what storing added to the hashed metadata
// document: the custody member, the two stored_at members, and the store
// age (hashed as the receive age).
func metadataForHash(meta map[string]any) map[string]any {
	m := maps.Clone(meta)
	delete(m, "custody")
	if ts, ok := m["timestamps"].(map[string]any); ok {
		ts = maps.Clone(ts)
		delete(ts, "stored_at")
		delete(ts, "stored_at_epoch_ns")
		m["timestamps"] = ts
	}
	if f, ok := m["freshness"].(map[string]any); ok {
		f = maps.Clone(f)
		if _, has := f["event_age_at_store_seconds"]; has {
			f["event_age_at_store_seconds"] = f["event_age_at_receive_seconds"]
		}
		m["freshness"] = f
	}
	return m
}
