package record

import (
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
	return MessageEnvelope(e, p, EnvelopeOptions{
		Schema:          FileSchema,
		LabelSeparator:  ";",
		Metadata:        includeMetadata,
		StoredAt:        storedAt,
		Custody:         true,
		MissionMetadata: true,
		SecurityLabels:  true,
	})
}
