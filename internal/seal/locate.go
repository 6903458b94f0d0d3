package seal

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// MaxInput is the largest document Locate accepts, after gzip
// decompression: the decrypt command's 64 MiB input limit (docs/security.md#payload-encryption-keys),
// applied again so a small gzip bomb cannot expand without bound.
const MaxInput = 64 << 20

// Locate finds the encryption envelope in a document the product wrote and
// returns it as bytes Decrypt accepts (docs/security.md#payload-encryption-keys). Gzip input (magic 1f 8b)
// is decompressed first. The first location that applies wins:
//
//  1. the root object has _nats_sinks_encryption (a raw envelope, an SQL
//     column value, a NATS or HTTP body sent as the payload itself);
//  2. the root's payload has it (file record, S3 object, HTTP or Kafka
//     envelope);
//  3. the root's payload_base64 (a DLQ body) decodes to JSON that has it.
//
// Where the spec is silent, Locate also looks inside a payload stored as
// a text or bytes envelope (payload_mode text_envelope or bytes_envelope,
// docs/formats.md#payload-normalisation): the wrapped bytes are the envelope the sink received.
// "Has it" means the key holds a JSON object.
//
// When nothing applies the error is ErrNoEnvelope (a SerializationError).
func Locate(doc []byte) ([]byte, error) { return locate(doc, MaxInput) }

// locate is Locate with the size limit as a parameter, for tests.
func locate(doc []byte, limit int) ([]byte, error) {
	if len(doc) >= 2 && doc[0] == 0x1f && doc[1] == 0x8b {
		var err error
		if doc, err = gunzip(doc, limit); err != nil {
			return nil, err
		}
	}
	if len(doc) > limit {
		return nil, fmt.Errorf("input exceeds the %d byte limit", limit)
	}
	v, err := jsonx.Parse(doc)
	if err != nil {
		return nil, serialization(ErrNoEnvelope)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, serialization(ErrNoEnvelope)
	}
	if hasEnvelope(root) {
		return doc, nil
	}
	if p, ok := root["payload"].(map[string]any); ok {
		if hasEnvelope(p) {
			return jsonx.Marshal(p, jsonx.ASCII), nil
		}
		if raw, ok := unwrapPayload(p); ok && envelopeJSON(raw) {
			return raw, nil
		}
	}
	if s, ok := root["payload_base64"].(string); ok {
		if raw, err := decodeStrictBase64(s); err == nil && envelopeJSON(raw) {
			return raw, nil
		}
	}
	return nil, serialization(ErrNoEnvelope)
}

func hasEnvelope(m map[string]any) bool {
	_, ok := m[EnvelopeKey].(map[string]any)
	return ok
}

// envelopeJSON reports whether raw is a JSON object holding an envelope.
func envelopeJSON(raw []byte) bool {
	_, ok := envelopeObject(raw)
	return ok
}

// unwrapPayload returns the bytes inside a docs/formats.md#payload-normalisation text or bytes
// envelope: {"_nats_sinks": {"payload_encoding": "utf-8"|"base64", …},
// "payload": "…"}.
func unwrapPayload(p map[string]any) ([]byte, bool) {
	meta, ok := p["_nats_sinks"].(map[string]any)
	if !ok {
		return nil, false
	}
	s, ok := p["payload"].(string)
	if !ok {
		return nil, false
	}
	switch meta["payload_encoding"] {
	case "utf-8":
		return []byte(s), true
	case "base64":
		raw, err := decodeStrictBase64(s)
		return raw, err == nil
	}
	return nil, false
}

// gunzip decompresses every gzip member of data, up to limit bytes.
func gunzip(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decompress gzip input: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompress gzip input: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("decompressed input exceeds the %d byte limit", limit)
	}
	if err := zr.Close(); err != nil {
		return nil, fmt.Errorf("decompress gzip input: %w", err)
	}
	return out, nil
}
