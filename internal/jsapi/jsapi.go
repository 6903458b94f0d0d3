// Package jsapi sends the few JetStream API requests the operator commands
// (dlq, status, replay) make directly, instead of through nats.go's
// jetstream handles: jetstream.Stream needs a STREAM.INFO request first,
// which a least-privilege user of `dlq list` may not hold, and nats.go's
// GetMsg has no start_time. Every request names its subject, so an
// operator's NATS permissions can be exactly the subjects listed in
// docs/nats-permissions.md.
//
// A request the server refuses for permissions is answered with an
// asynchronous violation, never a reply; the Client watches the
// connection's errors and fails such a request at once with the server's
// text (which names the subject) instead of waiting for its timeout.
package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultTimeout bounds every request (five seconds, as the operator
// commands document).
const DefaultTimeout = 5 * time.Second

// Prefix returns the JetStream API prefix for a domain or an API prefix:
// "$JS.API", "$JS.<domain>.API" or the prefix without a trailing dot.
func Prefix(domain, apiPrefix *string) string {
	switch {
	case domain != nil && *domain != "":
		return "$JS." + *domain + ".API"
	case apiPrefix != nil && *apiPrefix != "":
		return strings.TrimSuffix(*apiPrefix, ".")
	}
	return "$JS.API"
}

// A Client sends JetStream API requests on one connection. Create it with
// New and Close it before closing the connection; it is safe for
// concurrent use.
type Client struct {
	nc      *nats.Conn
	prefix  string
	timeout time.Duration
	prev    nats.ErrHandler

	mu         sync.Mutex
	waiting    map[*waiter]struct{}
	violations chan error
}

type waiter struct {
	subject string
	cancel  context.CancelCauseFunc
}

// New returns a Client for nc using prefix (see Prefix). It wraps nc's
// error handler to see permission violations; Close restores it.
func New(nc *nats.Conn, prefix string) *Client {
	c := &Client{nc: nc, prefix: prefix, timeout: DefaultTimeout, prev: nc.ErrorHandler(), waiting: map[*waiter]struct{}{},
		violations: make(chan error, 16)}
	nc.SetErrorHandler(func(conn *nats.Conn, s *nats.Subscription, err error) {
		if c.prev != nil {
			c.prev(conn, s, err)
		}
		if errors.Is(err, nats.ErrPermissionViolation) {
			c.refused(err)
			select {
			case c.violations <- err:
			default: // a burst of the same refusal: the first ones tell
			}
		}
	})
	return c
}

// Violations delivers the permission violations the server reports on the
// connection, whatever request or publish caused them (a refused pull
// request or ACK is not a request with a reply).
func (c *Client) Violations() <-chan error { return c.violations }

// Close restores the connection's error handler.
func (c *Client) Close() { c.nc.SetErrorHandler(c.prev) }

// Conn returns the connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Subject returns the API subject <prefix>.<parts joined by dots>.
func (c *Client) Subject(parts ...string) string {
	return c.prefix + "." + strings.Join(parts, ".")
}

// refused fails the waiting requests a violation is about: a publish
// violation names its subject; a subscription violation (the reply inbox)
// concerns every request.
func (c *Client) refused(err error) {
	text := err.Error()
	inbox := strings.Contains(text, "Subscription to")
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.waiting {
		if inbox || strings.Contains(text, `"`+w.subject+`"`) || strings.Contains(text, `"`+w.subject+`.`) {
			w.cancel(&RefusedError{Subject: w.subject, Err: err})
		}
	}
}

// RefusedError is a request or publish the server refused for permissions.
type RefusedError struct {
	Subject string
	Err     error // the server's violation
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the server refused %s: %v", e.Subject, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Watch returns a context that ends with a *RefusedError cause when the
// server refuses a publish to subject or to a subject below it (nats.go
// appends the filter to CONSUMER.CREATE subjects), and a function to stop
// watching. Requests made through nats.go's jetstream package and
// JetStream publishes use it.
func (c *Client) Watch(ctx context.Context, subject string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &waiter{subject: subject, cancel: cancel}
	c.mu.Lock()
	c.waiting[w] = struct{}{}
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.waiting, w)
		c.mu.Unlock()
		cancel(nil)
	}
}

// Explain returns the refusal behind ctx's end when there is one, else err.
func Explain(ctx context.Context, err error) error {
	var re *RefusedError
	if cause := context.Cause(ctx); errors.As(cause, &re) {
		return re
	}
	return err
}

// apiResponse is the error part every API response may carry.
type apiResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// Request sends req (JSON-encoded; nil sends an empty body) to subject and
// decodes the reply into resp. An error reply is returned as a
// *jetstream.APIError (errors.Is works with jetstream's sentinel errors).
func (c *Client) Request(ctx context.Context, subject string, req, resp any) error {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, stop := c.Watch(ctx, subject)
	defer stop()
	msg, err := c.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		err = Explain(ctx, err)
		var re *RefusedError
		if errors.As(err, &re) {
			return err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no reply within %v", subject, c.timeout)
		}
		return fmt.Errorf("%s: %w", subject, err)
	}
	var r apiResponse
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return fmt.Errorf("%s: malformed reply: %w", subject, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if resp != nil {
		if err := json.Unmarshal(msg.Data, resp); err != nil {
			return fmt.Errorf("%s: malformed reply: %w", subject, err)
		}
	}
	return nil
}

// StreamNames returns the streams whose subjects capture subject (every
// stream when subject is "").
func (c *Client) StreamNames(ctx context.Context, subject string) ([]string, error) {
	var names []string
	for {
		var resp struct {
			Total   int      `json:"total"`
			Streams []string `json:"streams"`
		}
		req := map[string]any{"offset": len(names)}
		if subject != "" {
			req["subject"] = subject
		}
		if err := c.Request(ctx, c.Subject("STREAM", "NAMES"), req, &resp); err != nil {
			return nil, err
		}
		names = append(names, resp.Streams...)
		if len(resp.Streams) == 0 || len(names) >= resp.Total {
			return names, nil
		}
	}
}

// StreamInfo is the part of a stream's info the commands read.
type StreamInfo struct {
	Config struct {
		Name       string        `json:"name"`
		Subjects   []string      `json:"subjects"`
		Duplicates time.Duration `json:"duplicate_window"`
	} `json:"config"`
	State struct {
		Msgs      uint64            `json:"messages"`
		FirstSeq  uint64            `json:"first_seq"`
		FirstTime time.Time         `json:"first_ts"`
		LastSeq   uint64            `json:"last_seq"`
		LastTime  time.Time         `json:"last_ts"`
		Subjects  map[string]uint64 `json:"subjects"`
	} `json:"state"`
}

// StreamInfo returns stream's info; a non-empty subjectsFilter makes the
// server count the messages per subject matching it (State.Subjects).
func (c *Client) StreamInfo(ctx context.Context, stream, subjectsFilter string) (*StreamInfo, error) {
	var req any
	if subjectsFilter != "" {
		req = map[string]any{"subjects_filter": subjectsFilter}
	}
	var info StreamInfo
	if err := c.Request(ctx, c.Subject("STREAM", "INFO", stream), req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// A Msg is one stored stream message.
type Msg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
	Time    time.Time
}

// GetMsgRequest selects a stored message: Seq alone is that sequence;
// with NextBySubject the first message at or after Seq (or StartTime) on
// that subject pattern.
type GetMsgRequest struct {
	Seq           uint64     `json:"seq,omitempty"`
	NextBySubject string     `json:"next_by_subj,omitempty"`
	StartTime     *time.Time `json:"start_time,omitempty"`
}

// GetMsg returns the message req selects from stream; no such message is
// an error matching jetstream.ErrMsgNotFound.
func (c *Client) GetMsg(ctx context.Context, stream string, req GetMsgRequest) (*Msg, error) {
	var resp struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := c.Request(ctx, c.Subject("STREAM", "MSG", "GET", stream), req, &resp); err != nil {
		return nil, err
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("%s: reply without a message", c.Subject("STREAM", "MSG", "GET", stream))
	}
	m := &Msg{Subject: resp.Message.Subject, Seq: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, fmt.Errorf("stream %s sequence %d: malformed headers: %w", stream, m.Seq, err)
		}
		m.Header = h
	}
	return m, nil
}

// DeleteMsg removes message seq from stream without overwriting its bytes
// (no_erase), as `nats stream rmm` does by default.
func (c *Client) DeleteMsg(ctx context.Context, stream string, seq uint64) error {
	var resp struct {
		Success bool `json:"success"`
	}
	if err := c.Request(ctx, c.Subject("STREAM", "MSG", "DELETE", stream), map[string]any{"seq": seq, "no_erase": true}, &resp); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("stream %s: delete of sequence %d not confirmed", stream, seq)
	}
	return nil
}

// ConsumerInfo returns the info of consumer on stream.
func (c *Client) ConsumerInfo(ctx context.Context, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	var info jetstream.ConsumerInfo
	if err := c.Request(ctx, c.Subject("CONSUMER", "INFO", stream, consumer), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
