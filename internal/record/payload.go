package record

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// PayloadMode selects payload normalisation (data-shapes §4).
type PayloadMode string

// Payload modes.
const (
	JSONOrEnvelope PayloadMode = "json_or_envelope"
	JSONOnly       PayloadMode = "json_only"
	TextEnvelope   PayloadMode = "text_envelope"
	BytesEnvelope  PayloadMode = "bytes_envelope"
)

// Payload is a normalised payload: Value is the JSON value to store (a jsonx
// tree whose objects are jsonx.Object in key order, as jsonx.ParseSorted
// returns them) and Info the payload_info object ({"original_format",
// "sha256", "size_bytes", "wrapped"}).
type Payload struct {
	Value any
	Info  jsonx.Object
}

// Original formats recorded in payload_info.
const (
	FormatJSON  = "json"
	FormatText  = "text"
	FormatBytes = "bytes"
)

// NormalisePayload converts e.Data per mode. Errors are wrapped with
// sink.AsPermanentType(sink.SerializationError, …) and carry no payload bytes.
//
// An omitted payload (headers-only, data-shapes §2.3) is always the empty
// text envelope, whatever the mode: runtime.md §18 stores "the empty-body
// marker" for it, and json_only must not dead-letter a message only because
// the server left its body out. An empty mode means json_or_envelope.
func NormalisePayload(e *sink.Envelope, mode PayloadMode) (Payload, error) {
	data := e.Data
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if e.Payload.Omitted {
		return wrapText(data, digest), nil
	}
	switch mode {
	case JSONOrEnvelope, "":
		if !utf8.Valid(data) {
			return wrapBytes(data, digest), nil
		}
		if v, err := jsonx.ParseSorted(data); err == nil {
			return Payload{Value: v, Info: info(FormatJSON, false, digest, len(data))}, nil
		}
		return wrapText(data, digest), nil
	case JSONOnly:
		if !utf8.Valid(data) {
			return Payload{}, notUTF8(e.Subject)
		}
		v, err := jsonx.ParseSorted(data)
		if err != nil {
			// The parser's message would locate the problem in the
			// payload, but errors must not describe payload bytes.
			return Payload{}, sink.AsPermanentType(sink.SerializationError,
				errors.New("message payload for subject '"+e.Subject+"' is not valid JSON"))
		}
		return Payload{Value: v, Info: info(FormatJSON, false, digest, len(data))}, nil
	case TextEnvelope:
		if !utf8.Valid(data) {
			return Payload{}, notUTF8(e.Subject)
		}
		return wrapText(data, digest), nil
	case BytesEnvelope:
		return wrapBytes(data, digest), nil
	}
	return Payload{}, sink.AsPermanentType(sink.SerializationError,
		errors.New("unknown payload mode "+string(mode)))
}

func notUTF8(subject string) error {
	return sink.AsPermanentType(sink.SerializationError,
		errors.New("message payload for subject '"+subject+"' is not valid UTF-8"))
}

func info(format string, wrapped bool, digest string, size int) jsonx.Object {
	return jsonx.Object{
		{Key: "original_format", Value: format},
		{Key: "sha256", Value: digest},
		{Key: "size_bytes", Value: size},
		{Key: "wrapped", Value: wrapped},
	}
}

func wrapText(data []byte, digest string) Payload {
	return Payload{
		Value: envelope("utf-8", FormatText, digest, len(data), string(data)),
		Info:  info(FormatText, true, digest, len(data)),
	}
}

func wrapBytes(data []byte, digest string) Payload {
	return Payload{
		Value: envelope("base64", FormatBytes, digest, len(data), base64.StdEncoding.EncodeToString(data)),
		Info:  info(FormatBytes, true, digest, len(data)),
	}
}

// envelope is the payload envelope of data-shapes §4.
func envelope(encoding, format, digest string, size int, payload string) jsonx.Object {
	return jsonx.Object{
		{Key: "_nats_sinks", Value: jsonx.Object{
			{Key: "payload_encoding", Value: encoding},
			{Key: "payload_envelope_version", Value: 1},
			{Key: "payload_format", Value: format},
			{Key: "sha256", Value: digest},
			{Key: "size_bytes", Value: size},
		}},
		{Key: "payload", Value: payload},
	}
}
