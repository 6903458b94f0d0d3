package mapping

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// Value returns the column's converted value for one message: payload is the
// parsed payload object (see Payload), or nil when the mapping does not need
// it. Missing and null values follow the column's required and default
// rules. An error is a ValidationError naming the column, the path and the
// reason, never the value.
func (c *Column) Value(e *sink.Envelope, payload any) (any, error) {
	v, present := c.src.value(e, payload)
	var reason string
	switch {
	case !present && c.Required:
		reason = "required value is missing"
	case !present:
		return c.Default, nil
	case v == nil && c.Required:
		reason = "required value is null"
	case v == nil:
		return nil, nil
	default:
		var out any
		if out, reason = c.convert(v); reason == "" {
			return out, nil
		}
	}
	return nil, sink.AsPermanentType(sink.ValidationError,
		fmt.Errorf("mapping column %q (path %q): %s", c.Name, c.Path, reason))
}

// Values appends every column's value for e to dst, in mapping order, and
// stops at the first column that fails (its error, as Value's).
func (m *Mapping) Values(dst []any, e *sink.Envelope, payload any) ([]any, error) {
	for _, c := range m.Columns {
		v, err := c.Value(e, payload)
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// Payload parses e's payload for a row that reads it: the body must be a JSON
// object, returned as a jsonx.Object in key order with exact number tokens
// (jsonx.ParseSortedExact). Otherwise the error is a
// ValidationError ("payload is not a JSON object (got array)", "payload
// omitted (headers-only delivery)"), or for payload mode json_only the
// SerializationError the audit layout gives a body that is not JSON.
func Payload(e *sink.Envelope, mode record.PayloadMode) (jsonx.Object, error) {
	if e.Payload.Omitted {
		return nil, invalid("payload omitted (headers-only delivery)")
	}
	v, err := jsonx.ParseSortedExact(e.Data)
	if err != nil {
		if mode == record.JSONOnly {
			if _, nerr := record.NormalisePayload(e, mode); nerr != nil {
				return nil, nerr
			}
		}
		got := "text"
		if !utf8.Valid(e.Data) {
			got = "bytes"
		}
		return nil, invalid("payload is not a JSON object (got " + got + ")")
	}
	obj, ok := v.(jsonx.Object)
	if !ok {
		return nil, invalid("payload is not a JSON object (got " + jsonKind(v) + ")")
	}
	return obj, nil
}

func invalid(msg string) error { return sink.AsPermanentType(sink.ValidationError, errors.New(msg)) }
