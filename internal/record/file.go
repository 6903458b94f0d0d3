package record

import (
	"time"

	"github.com/nats-sinks/nats-sink/sink"
)

// FileSchema is the schema name of file records.
const FileSchema = "nats_sinks.file.message.v1"

// FileRecord returns the nats_sinks.file.message.v1 document (§7); metadata
// is included when includeMetadata. Encode it with the utf8 flavour and
// append one '\n'.
func FileRecord(e *sink.Envelope, p Payload, includeMetadata bool, storedAt time.Time) map[string]any {
	labels := Labels(e)
	doc := map[string]any{
		"schema":            FileSchema,
		"schema_version":    1,
		"subject":           e.Subject,
		"stream":            str(e.Stream),
		"stream_sequence":   seq(e.StreamSequence),
		"consumer":          str(e.Consumer),
		"consumer_sequence": seq(e.ConsumerSequence),
		"message_id":        str(e.MessageID),
		"priority":          str(e.Priority),
		"classification":    str(e.Classification),
		"labels":            JoinLabels(labels, ";"),
		"labels_list":       labels,
		"mission_metadata":  nil,
		"security_labels":   nil,
		"custody":           nil,
		"payload":           p.Value,
		"payload_info":      p.Info,
	}
	if includeMetadata {
		doc["metadata"] = Metadata(e, storedAt, false)
	}
	return doc
}
