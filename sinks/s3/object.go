package s3sink

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Schema names of the objects the sink writes (docs/formats.md#s3-objects).
const (
	ObjectSchema  = "nats_sinks.s3.object.v1"
	SidecarSchema = "nats_sinks.s3.sidecar.v1"
)

// object is one prepared PUT: key, body and headers.
type object struct {
	key      string
	body     []byte
	metadata map[string]string // nil when metadata_mode is none
	gzip     bool              // Content-Encoding: gzip
	plain    []byte            // body before compression
}

// prepared is everything written for one message.
type prepared struct {
	primary  object
	sidecar  *object // nil unless metadata_mode is sidecar
	identity string  // record.Identity under key_strategy
}

// prepare builds the objects of e, stored at now. Every error is Permanent:
// a message whose key or body cannot be built never can be.
func (c *Config) prepare(e *sink.Envelope, now time.Time) (prepared, error) {
	key, err := c.objectKey(e)
	if err != nil {
		return prepared{}, err
	}
	id, err := record.Identity(c.KeyStrategy, e)
	if err != nil {
		return prepared{}, err // unreachable: objectKey needed the same material
	}
	p, err := record.NormalisePayload(e, record.PayloadMode(c.PayloadMode))
	if err != nil {
		return prepared{}, err
	}
	var doc any = p.Value
	if c.ObjectFormat == "envelope" {
		doc = c.envelope(e, p, now)
	}
	body := jsonx.Marshal(doc, jsonx.UTF8)
	if len(body) > c.MaxObjectBytes {
		return prepared{}, tooLarge("S3 object", len(body), c.MaxObjectBytes)
	}
	out := prepared{primary: object{key: key, body: body, plain: body}, identity: id}
	if c.Compression == "gzip" {
		if out.primary.body, err = gzipBytes(body); err != nil {
			return prepared{}, err
		}
		if n := len(out.primary.body); n > c.MaxObjectBytes {
			return prepared{}, tooLarge("compressed S3 object", n, c.MaxObjectBytes)
		}
		out.primary.gzip = true
	}
	if c.MetadataMode == "none" {
		return out, nil
	}
	if out.primary.metadata, err = c.userMetadata(ObjectSchema, e.MessageID); err != nil {
		return prepared{}, err
	}
	out.primary.metadata[metaIdentityHash] = sha256Hex(id)
	if c.MetadataMode != "sidecar" {
		return out, nil
	}
	sk := c.sidecarKey(key)
	if err := c.checkSidecarCollision(key, sk); err != nil {
		return prepared{}, err
	}
	sbody := jsonx.Marshal(c.sidecar(e, p, key, now), jsonx.UTF8)
	if len(sbody) > c.MaxObjectBytes {
		return prepared{}, tooLarge("S3 sidecar", len(sbody), c.MaxObjectBytes)
	}
	smeta, err := c.userMetadata(SidecarSchema, "")
	if err != nil {
		return prepared{}, err
	}
	out.sidecar = &object{key: sk, body: sbody, metadata: smeta}
	return out, nil
}

func tooLarge(what string, n, limit int) error {
	return sink.AsPermanentType(sink.SerializationError,
		fmt.Errorf("%s of %d bytes exceeds max_object_bytes (%d)", what, n, limit))
}

// envelope returns the nats_sinks.s3.object.v1 document (docs/formats.md#s3-objects):
// the common message envelope with every optional member, a metadata
// document that has its own custody key, and the object's own headers and
// epoch times.
func (c *Config) envelope(e *sink.Envelope, p record.Payload, now time.Time) jsonx.Object {
	return record.MessageEnvelope(e, p, record.EnvelopeOptions{
		Schema:          ObjectSchema,
		LabelSeparator:  ";",
		Metadata:        true,
		MetadataCustody: true,
		StoredAt:        now,
		Custody:         true,
		MissionMetadata: true,
		SecurityLabels:  true,
		Extra: jsonx.Object{
			{Key: "headers", Value: record.Headers(e)},
			{Key: "jetstream_timestamp_epoch_ns", Value: jetStreamNS(e)},
			{Key: "message_created_at_epoch_ns", Value: createdNS(e)},
			{Key: "received_at_epoch_ns", Value: record.EpochNS(record.Micro(e.ReceivedAt))},
			{Key: "stored_at_epoch_ns", Value: record.EpochNS(record.Micro(now))},
		},
	})
}

// sidecar returns the nats_sinks.s3.sidecar.v1 document (docs/formats.md#s3-objects):
// the object's envelope without its payload, headers and event times, plus
// where and how the object was written. Its metadata document has no
// custody key; the sidecar has its own.
func (c *Config) sidecar(e *sink.Envelope, p record.Payload, key string, now time.Time) jsonx.Object {
	return record.MessageEnvelope(e, p, record.EnvelopeOptions{
		Schema:          SidecarSchema,
		LabelSeparator:  ";",
		Metadata:        true,
		StoredAt:        now,
		Custody:         true,
		MissionMetadata: true,
		SecurityLabels:  true,
		NoPayload:       true,
		Extra: jsonx.Object{
			{Key: "duplicate_policy", Value: c.DuplicatePolicy},
			{Key: "key_strategy", Value: c.KeyStrategy},
			{Key: "object_key", Value: key},
			{Key: "stored_at_epoch_ns", Value: record.EpochNS(record.Micro(now))},
		},
	})
}

// jetStreamNS is the JetStream timestamp in epoch ns (µs precision, docs/file-sink.md),
// or null.
func jetStreamNS(e *sink.Envelope) any {
	if e.Timestamp.IsZero() {
		return nil
	}
	return record.EpochNS(record.JetStreamTime(e.Timestamp))
}

// createdNS is the message creation time of docs/formats.md#metadata-document in epoch ns, or
// null.
func createdNS(e *sink.Envelope) any {
	c := record.CreatedAt(e)
	if c.Source == record.SourceMissing {
		return nil
	}
	return record.EpochNS(c.Time)
}

// userMetadata returns the x-amz-meta-* entries of docs/formats.md#s3-objects for an
// object of the given schema; messageID adds the message id's hash.
func (c *Config) userMetadata(schema, messageID string) (map[string]string, error) {
	m := make(map[string]string, len(c.ObjectMetadata)+4)
	m[metaSchema] = schema
	m[metaSchemaVersion] = "1"
	m[metaKeyStrategy] = c.KeyStrategy
	for k, v := range c.ObjectMetadata {
		m[k] = v
	}
	if messageID != "" {
		m[metaMessageIDHash] = sha256Hex(messageID)
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	if n > c.MaxMetadataBytes {
		// Unreachable with a validated Config (the largest size is checked
		// at load); kept for Configs built by hand.
		return nil, sink.AsPermanentType(sink.SerializationError,
			fmt.Errorf("S3 user metadata of %d bytes exceeds max_metadata_bytes (%d)", n, c.MaxMetadataBytes))
	}
	return m, nil
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// gzipWriters reuses compressors: a new gzip.Writer allocates about 800 kB
// of deflate state, which dominated the cost of a small object.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression) // a valid level cannot fail
	return zw
}}

// gzipBytes compresses b as the file sink does (docs/formats.md#file-records): header
// MTIME 0, no file name, OS byte 3 (Unix), so equal input gives equal bytes.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(b)/3 + 64)
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf) // also clears the header fields
	zw.OS = 3
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}
