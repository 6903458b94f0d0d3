package record

import (
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// FileSchema is the schema name of file records.
const FileSchema = "nats_sinks.file.message.v1"

// FileRecord returns the nats_sinks.file.message.v1 document (§7); metadata
// is included when includeMetadata. Encode it with the utf8 flavour and
// append one '\n'. Members are in canonical key order (see Metadata).
func FileRecord(e *sink.Envelope, p Payload, includeMetadata bool, storedAt time.Time) jsonx.Object {
	labels := Labels(e)
	doc := make(jsonx.Object, 0, 18)
	doc = append(doc,
		jsonx.Member{Key: "classification", Value: str(&e.Classification)},
		jsonx.Member{Key: "consumer", Value: str(&e.Consumer)},
		jsonx.Member{Key: "consumer_sequence", Value: seq(&e.ConsumerSequence)},
		jsonx.Member{Key: "custody"},
		jsonx.Member{Key: "labels", Value: JoinLabels(labels, ";")},
		jsonx.Member{Key: "labels_list", Value: labels},
		jsonx.Member{Key: "message_id", Value: str(&e.MessageID)},
	)
	if includeMetadata {
		doc = append(doc, jsonx.Member{Key: "metadata", Value: Metadata(e, storedAt, false)})
	}
	return append(doc,
		jsonx.Member{Key: "mission_metadata"},
		jsonx.Member{Key: "payload", Value: p.Value},
		jsonx.Member{Key: "payload_info", Value: p.Info},
		jsonx.Member{Key: "priority", Value: str(&e.Priority)},
		jsonx.Member{Key: "schema", Value: FileSchema},
		jsonx.Member{Key: "schema_version", Value: 1},
		jsonx.Member{Key: "security_labels"},
		jsonx.Member{Key: "stream", Value: str(&e.Stream)},
		jsonx.Member{Key: "stream_sequence", Value: seq(&e.StreamSequence)},
		jsonx.Member{Key: "subject", Value: &e.Subject},
	)
}
