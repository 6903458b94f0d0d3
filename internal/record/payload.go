package record

import (
	"encoding/base64"
	"errors"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/sink"
)

// PayloadMode selects payload normalisation (docs/formats.md#payload-normalisation).
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
// returns them); Info returns the payload_info object.
type Payload struct {
	Value any

	format  string
	wrapped bool
	data    []byte
	digest  string // hex SHA-256 of data, when already computed
}

// Info returns the payload_info object ({"original_format", "sha256",
// "size_bytes", "wrapped"}). The digest of a JSON payload is computed here,
// not by NormalisePayload: the SQL rows never store it, and hashing every
// payload was a tenth of building a row.
func (p Payload) Info() jsonx.Object {
	digest := p.digest
	if digest == "" {
		digest = sha256Hex(p.data)
	}
	return jsonx.Object{
		{Key: "original_format", Value: p.format},
		{Key: "sha256", Value: digest},
		{Key: "size_bytes", Value: len(p.data)},
		{Key: "wrapped", Value: p.wrapped},
	}
}

// Format returns the original format: FormatJSON, FormatText or FormatBytes
// (payload_info.original_format).
func (p Payload) Format() string { return p.format }

func parsed(v any, data []byte) Payload {
	return Payload{Value: v, format: FormatJSON, data: data}
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
// An omitted payload (headers-only, docs/headers-only.md) is always the empty
// text envelope, whatever the mode: docs/headers-only.md stores "the empty-body
// marker" for it, and json_only must not dead-letter a message only because
// the server left its body out. An empty mode means json_or_envelope.
func NormalisePayload(e *sink.Envelope, mode PayloadMode) (Payload, error) {
	data := e.Data
	if e.Payload.Omitted {
		return wrapText(data), nil
	}
	switch mode {
	case JSONOrEnvelope, "":
		if !utf8.Valid(data) {
			return wrapBytes(data), nil
		}
		if v, err := jsonx.ParseSorted(data); err == nil {
			return parsed(v, data), nil
		}
		return wrapText(data), nil
	case JSONOnly:
		if !utf8.Valid(data) {
			return Payload{}, notUTF8(e.Subject)
		}
		v, err := jsonx.ParseSorted(data)
		if err != nil {
			return Payload{}, notJSON(e.Subject)
		}
		return parsed(v, data), nil
	case TextEnvelope:
		if !utf8.Valid(data) {
			return Payload{}, notUTF8(e.Subject)
		}
		return wrapText(data), nil
	case BytesEnvelope:
		return wrapBytes(data), nil
	}
	return Payload{}, sink.AsPermanentType(sink.SerializationError,
		errors.New("unknown payload mode "+string(mode)))
}

// AppendPayload appends the JSON text of e's normalised payload (what
// jsonx.AppendOrdered(dst, NormalisePayload(e, mode).Value, f, o) writes)
// and reports NormalisePayload's error when it would fail (dst is then
// returned unchanged).
//
// A JSON payload is re-encoded by jsonx.AppendCanonical, with no tree: the
// SQL sinks need only its text, and parsing it into a tree to encode it
// again was a few percent of the pipeline's CPU per message. The wrapped
// forms build their small envelope as NormalisePayload does.
func AppendPayload(dst []byte, e *sink.Envelope, mode PayloadMode, f jsonx.Flavour, o jsonx.KeyOrder) ([]byte, error) {
	if e.Payload.Omitted {
		return jsonx.AppendOrdered(dst, wrapText(e.Data).Value, f, o), nil
	}
	switch mode {
	case JSONOrEnvelope, "":
		return appendJSON(dst, e, false, f, o)
	case JSONOnly:
		return appendJSON(dst, e, true, f, o)
	}
	p, err := NormalisePayload(e, mode)
	if err != nil {
		return dst, err
	}
	return jsonx.AppendOrdered(dst, p.Value, f, o), nil
}

// appendJSON is AppendPayload for json_or_envelope and, with only,
// json_only.
func appendJSON(dst []byte, e *sink.Envelope, only bool, f jsonx.Flavour, o jsonx.KeyOrder) ([]byte, error) {
	data := e.Data
	out, err := jsonx.AppendCanonical(dst, data, f, o)
	if err == nil {
		return out, nil
	}
	// AppendCanonical checks UTF-8 first, as NormalisePayload does;
	// ErrNotUTF8 also stands for a byte-order mark, which is valid text.
	valid := !errors.Is(err, jsonx.ErrNotUTF8) || utf8.Valid(data)
	switch {
	case only && !valid:
		return dst, notUTF8(e.Subject)
	case only:
		return dst, notJSON(e.Subject)
	case !valid:
		return jsonx.AppendOrdered(dst, wrapBytes(data).Value, f, o), nil
	}
	return jsonx.AppendOrdered(dst, wrapText(data).Value, f, o), nil
}

func notUTF8(subject string) error {
	return sink.AsPermanentType(sink.SerializationError,
		errors.New("message payload for subject '"+subject+"' is not valid UTF-8"))
}

// notJSON is json_only's error for a payload that is not JSON. The parser's
// message would locate the problem in the payload, but errors must not
// describe payload bytes.
func notJSON(subject string) error {
	return sink.AsPermanentType(sink.SerializationError,
		errors.New("message payload for subject '"+subject+"' is not valid JSON"))
}

func wrapText(data []byte) Payload {
	digest := sha256Hex(data)
	return Payload{
		Value:  envelope("utf-8", FormatText, digest, len(data), string(data)),
		format: FormatText, wrapped: true, data: data, digest: digest,
	}
}

func wrapBytes(data []byte) Payload {
	digest := sha256Hex(data)
	return Payload{
		Value:  envelope("base64", FormatBytes, digest, len(data), base64.StdEncoding.EncodeToString(data)),
		format: FormatBytes, wrapped: true, data: data, digest: digest,
	}
}

// envelope is the payload envelope of docs/formats.md#payload-normalisation.
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
