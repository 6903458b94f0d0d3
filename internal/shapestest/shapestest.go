// Package shapestest holds the test inputs of the data-shapes spec that
// the record, DLQ and sink tests share: the golden message of data-shapes
// docs/formats.md#file-records with its receive and store times, and small numbered messages for
// batches. Tests only; nothing in the binary imports it.
package shapestest

import (
	"fmt"
	"time"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/sink"
)

// The receive and store times of the golden record (docs/formats.md#file-records).
var (
	Received = time.Date(2026, 5, 29, 10, 0, 0, 250000000, time.UTC)
	Stored   = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)
)

// GoldenMessage returns the input of docs/formats.md#file-records: stream ORDERS,
// sequence 42, a JSON payload with a non-ASCII character, message id,
// priority, labels (with a repeat and blanks), a creation time and a
// traceparent. Each call returns a fresh copy.
func GoldenMessage() intake.Message {
	return intake.Message{
		Subject: "orders.created",
		Reply:   "$JS.ACK.ORDERS.orders-file.1.42.7.1780048800123456000.3",
		Data:    []byte(`{"order_id":"O-1001","amount":42.50,"note":"café"}`),
		Header: map[string][]string{
			"Nats-Msg-Id":         {"O-1001"},
			"Nats-Sinks-Priority": {"high"},
			"Nats-Sinks-Labels":   {"billing; eu ;billing"},
			"Nats-Time-Stamp":     {"2026-05-29T09:59:59.5Z"},
			"traceparent":         {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		},
	}
}

// Golden returns the envelope of GoldenMessage, received at Received.
func Golden() *sink.Envelope {
	return intake.Build(GoldenMessage(), nil, Received)
}

// Envelope returns message seq of stream: subject "t.x", body {"n":seq},
// no headers, received at Received.
func Envelope(stream string, seq uint64) *sink.Envelope {
	reply := fmt.Sprintf("$JS.ACK.%s.c.1.%d.%d.1780048800123456000.0", stream, seq, seq)
	return intake.Build(intake.Message{Subject: "t.x", Reply: reply, Data: fmt.Appendf(nil, `{"n":%d}`, seq)}, nil, Received)
}

// Batch returns messages 1 to n of stream, as Envelope builds them.
func Batch(stream string, n int) []*sink.Envelope {
	b := make([]*sink.Envelope, n)
	for i := range b {
		b[i] = Envelope(stream, uint64(i+1))
	}
	return b
}
