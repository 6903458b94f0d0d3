package record

import (
	"sync"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// FileSchema is the schema name of file records.
const FileSchema = "nats_sinks.file.message.v1"

// FileRecord returns the nats_sinks.file.message.v1 document (docs/formats.md#file-records); metadata
// is included when includeMetadata. Encode it with the utf8 flavour and
// append one '\n'. Members are in canonical key order (see Metadata).
func FileRecord(e *sink.Envelope, p Payload, includeMetadata bool, storedAt time.Time) jsonx.Object {
	return MessageEnvelope(e, p, fileOptions(includeMetadata, storedAt))
}

func fileOptions(includeMetadata bool, storedAt time.Time) EnvelopeOptions {
	return EnvelopeOptions{
		Schema:          FileSchema,
		LabelSeparator:  ";",
		Metadata:        includeMetadata,
		StoredAt:        storedAt,
		Custody:         true,
		MissionMetadata: true,
		SecurityLabels:  true,
	}
}

// recordScratch holds the buffers AppendFileRecord encodes the payload and
// the metadata document into before they go into the record.
var recordScratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxRecordScratch bounds the buffers kept in recordScratch: one grown by a
// large payload is left to the GC.
const maxRecordScratch = 64 << 10

// AppendFileRecord appends the compact utf8 encoding of
// FileRecord(e, p, includeMetadata, storedAt), with p from
// NormalisePayload(e, mode), to dst: the same bytes as jsonx.Append of that
// document. It returns NormalisePayload's error (dst is then unchanged).
//
// It is the streaming form for sinks that write records at volume (the
// segments sink): a JSON payload goes through jsonx.AppendCanonical and the
// metadata document through AppendMetadata, with no tree for either. The
// trees were most of a record's encoding cost: about fifty members and
// twenty allocations for the metadata document alone, and one value per
// payload token.
func AppendFileRecord(dst []byte, e *sink.Envelope, mode PayloadMode, includeMetadata bool, storedAt time.Time) ([]byte, error) {
	bp := recordScratch.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= maxRecordScratch {
			*bp = buf[:0]
			recordScratch.Put(bp)
		}
	}()
	var p Payload
	var err error
	p, buf, err = rawPayload(buf, e, mode)
	if err != nil {
		return dst, err
	}
	o := fileOptions(false, storedAt)
	if includeMetadata {
		// "metadata" goes in as an extra member: MessageEnvelope merges it
		// into key order.
		start := len(buf)
		buf = AppendMetadata(buf, e, storedAt, false, jsonx.UTF8, jsonx.CanonicalOrder)
		o.Extra = jsonx.Object{{Key: "metadata", Value: jsonx.Raw(buf[start:])}}
	}
	return jsonx.Append(dst, MessageEnvelope(e, p, o), jsonx.UTF8), nil
}

// rawPayload is NormalisePayload with a JSON payload's value as its
// canonical text (jsonx.Raw) appended to buf, which it returns.
// AppendCanonical accepts exactly what ParseSorted does, so every other
// payload takes NormalisePayload's path unchanged.
func rawPayload(buf []byte, e *sink.Envelope, mode PayloadMode) (Payload, []byte, error) {
	if !e.Payload.Omitted && (mode == JSONOrEnvelope || mode == "" || mode == JSONOnly) {
		start := len(buf)
		if out, err := jsonx.AppendCanonical(buf, e.Data, jsonx.UTF8, jsonx.CanonicalOrder); err == nil {
			return Payload{Value: jsonx.Raw(out[start:]), format: FormatJSON, data: e.Data}, out, nil
		}
	}
	p, err := NormalisePayload(e, mode)
	return p, buf, err
}
