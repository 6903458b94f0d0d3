package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/jsapi"
)

// LocateDLQ returns the stream holding the DLQ subject: override when set
// (--dlq-stream), else the one stream whose subjects capture subject. None
// or several are configuration errors.
func LocateDLQ(ctx context.Context, c *jsapi.Client, subject, override string) (string, error) {
	if override != "" {
		return override, nil
	}
	names, err := c.StreamNames(ctx, subject)
	if err != nil {
		return "", fmt.Errorf("look up the stream capturing %q: %w", subject, err)
	}
	switch len(names) {
	case 0:
		return "", configError("dead_letter.subject: no JetStream stream captures %q", subject)
	case 1:
		return names[0], nil
	}
	return "", configError("dead_letter.subject: several streams capture %q (%s); use --dlq-stream", subject, strings.Join(names, ", "))
}

// A DLQ reads the entries of one DLQ subject from its stream, by sequence
// ($JS.API.STREAM.MSG.GET with next_by_subj). It never creates a consumer.
type DLQ struct {
	API     *jsapi.Client
	Stream  string
	Subject string
}

// ErrNoEntry is the error of Get for a sequence that is not a DLQ entry.
var ErrNoEntry = errors.New("no DLQ entry")

// Get returns entry seq: the message with that sequence, which must be on
// the DLQ subject.
func (d *DLQ) Get(ctx context.Context, seq uint64) (*dlq.Entry, error) {
	m, err := d.API.GetMsg(ctx, d.Stream, jsapi.GetMsgRequest{Seq: seq})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, d.missing()
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && m.Subject != d.Subject {
		return nil, fmt.Errorf("%w with sequence %d on %s", ErrNoEntry, seq, d.Subject)
	}
	if err != nil {
		return nil, err
	}
	return dlq.Read(m.Seq, m.Time, m.Header, m.Data), nil
}

// Scan calls fn for every entry from sequence from (0 means the first) in
// ascending sequence until fn returns false. With since set the scan starts
// at the first entry stored at or after since when the server can find it
// (start_time); a server that rejects that is scanned from from instead —
// the caller's filter still checks the time.
func (d *DLQ) Scan(ctx context.Context, from uint64, since time.Time, fn func(*dlq.Entry) bool) error {
	seq := max(from, 1)
	first := true
	for {
		req := jsapi.GetMsgRequest{Seq: seq, NextBySubject: d.Subject}
		if first && !since.IsZero() && from <= 1 {
			t := since.UTC()
			req = jsapi.GetMsgRequest{StartTime: &t, NextBySubject: d.Subject}
		}
		m, err := d.API.GetMsg(ctx, d.Stream, req)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return d.missing()
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return nil
		case err != nil && req.StartTime != nil && isAPIError(err):
			// An older server without start_time: scan by sequence.
			first = false
			continue
		case err != nil:
			return err
		}
		first = false
		if !fn(dlq.Read(m.Seq, m.Time, m.Header, m.Data)) {
			return nil
		}
		seq = m.Seq + 1
	}
}

// missing is the error for a DLQ stream that does not exist (only a
// --dlq-stream name can be one).
func (d *DLQ) missing() error {
	return configError("--dlq-stream: stream %q not found", d.Stream)
}

// isAPIError reports whether the server answered with an error (as
// opposed to refusing, timing out or failing the connection).
func isAPIError(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae)
}
