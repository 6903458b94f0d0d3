package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsapi"
)

// Check states of `status`.
const (
	StateOK      = "ok"
	StateFail    = "fail"
	StateSkipped = "skipped"
	StateUnknown = "unknown"
	StateInfo    = "-" // information rows (ack floor, delivered)
)

// Status is one refresh of `nats-sink status`: every check, read-only.
// Pointer fields are nil when unknown.
type Status struct {
	CheckedAt time.Time
	NATS      NATSCheck
	Consumer  ConsumerCheck
	AckFloor  *SeqInfo
	Delivered *SeqInfo
	Lag       LagCheck
	DLQ       DLQCheck
	Sink      SinkCheck
	Process   ProcessCheck
}

// NATSCheck is the connection.
type NATSCheck struct {
	State, Server string
	Err           error
}

// ConsumerCheck is nats.consumer's state ($JS.API.CONSUMER.INFO).
type ConsumerCheck struct {
	State                                                 string
	NumPending, NumAckPending, NumRedelivered, NumWaiting *int64
	Err                                                   error
}

// SeqInfo is a consumer position: stream and consumer sequence and when
// it last moved.
type SeqInfo struct {
	Stream, Consumer uint64
	LastActive       *time.Time
}

// LagCheck is how far the consumer is behind: messages not yet ACKed, and
// the age of the oldest of them.
type LagCheck struct {
	State    string
	Messages *int64
	Seconds  *float64
}

// DLQCheck is the DLQ subject's depth.
type DLQCheck struct {
	State, Subject, Stream string
	Entries                *uint64
	Err                    error
}

// SinkCheck is the sink's Open and health check.
type SinkCheck struct {
	State, Type, Detail string
	Duration            *time.Duration
	Err                 error
}

// ProcessCheck is the readiness of a `run` process at metrics.listen.
type ProcessCheck struct {
	State, Address string
	Readiness      string // ready, not_ready, draining, unreachable; "" not configured
}

// Failed returns the names of the failed checks, in table order.
func (s *Status) Failed() []string {
	var out []string
	for _, c := range []struct{ name, state string }{
		{"nats", s.NATS.State}, {"consumer", s.Consumer.State}, {"lag", s.Lag.State},
		{"dlq", s.DLQ.State}, {"sink", s.Sink.State}, {"process", s.Process.State},
	} {
		if c.state == StateFail {
			out = append(out, c.name)
		}
	}
	return out
}

// Healthy reports whether no check failed.
func (s *Status) Healthy() bool { return len(s.Failed()) == 0 }

// Limits are the thresholds that make lag and DLQ checks fail; nil means no
// limit.
type Limits struct {
	MaxLag        *int64
	MaxLagSeconds *float64
	MaxDLQ        *uint64
}

// StatusInput is what a refresh reads from.
type StatusInput struct {
	Config *config.Config
	// API is the connection's client; nil when connecting failed (ConnErr).
	API       *jsapi.Client
	Connected bool
	Server    string
	ConnErr   error
	// DLQStream overrides the lookup of the DLQ stream (--dlq-stream).
	DLQStream string
	Limits    Limits
	// Sink checks the sink; nil skips the check (--skip-sink).
	Sink func(ctx context.Context) (detail string, err error)
	// HTTP is the client for /readyz; nil means one with a 2 s timeout.
	HTTP *http.Client
	Now  func() time.Time
}

// GatherStatus runs every check once. It never creates, changes or deletes
// anything on the server.
func GatherStatus(ctx context.Context, in StatusInput) *Status {
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	cfg := in.Config
	s := &Status{CheckedAt: now()}
	s.Sink.Type = cfg.Sink.Type

	// nats
	switch {
	case in.API == nil:
		s.NATS = NATSCheck{State: StateFail, Err: in.ConnErr}
	case !in.Connected:
		s.NATS = NATSCheck{State: StateFail, Server: in.Server, Err: errors.New("disconnected; reconnecting")}
	default:
		s.NATS = NATSCheck{State: StateOK, Server: in.Server}
	}
	natsOK := s.NATS.State == StateOK

	// consumer, ack floor, delivered, lag
	s.Lag.State = StateUnknown
	switch {
	case !cfg.NATS.Durable:
		s.Consumer.State, s.Lag.State = StateSkipped, StateSkipped
	case !natsOK:
		s.Consumer.State = StateUnknown
	default:
		info, err := in.API.ConsumerInfo(ctx, cfg.NATS.Stream, cfg.NATS.Consumer)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			s.Consumer = ConsumerCheck{State: StateFail, Err: fmt.Errorf("consumer %q not found on stream %q", cfg.NATS.Consumer, cfg.NATS.Stream)}
		case errors.Is(err, jetstream.ErrStreamNotFound):
			s.Consumer = ConsumerCheck{State: StateFail, Err: fmt.Errorf("stream %q not found", cfg.NATS.Stream)}
		case err != nil:
			s.Consumer = ConsumerCheck{State: StateFail, Err: err}
		default:
			s.Consumer = ConsumerCheck{State: StateOK, NumPending: ptr(int64(info.NumPending)),
				NumAckPending: ptr(int64(info.NumAckPending)), NumRedelivered: ptr(int64(info.NumRedelivered)),
				NumWaiting: ptr(int64(info.NumWaiting))}
			s.AckFloor = &SeqInfo{Stream: info.AckFloor.Stream, Consumer: info.AckFloor.Consumer, LastActive: info.AckFloor.Last}
			s.Delivered = &SeqInfo{Stream: info.Delivered.Stream, Consumer: info.Delivered.Consumer, LastActive: info.Delivered.Last}
			s.Lag = lag(ctx, in, info, s.CheckedAt)
		}
	}

	// dlq
	s.DLQ = dlqDepth(ctx, in, natsOK)

	// sink
	if in.Sink == nil {
		s.Sink.State = StateSkipped
	} else {
		start := time.Now()
		detail, err := in.Sink(ctx)
		d := time.Since(start)
		s.Sink.Duration, s.Sink.Detail = &d, detail
		if err != nil {
			s.Sink.State, s.Sink.Err = StateFail, err
		} else {
			s.Sink.State = StateOK
		}
	}

	// process
	s.Process = processReady(ctx, cfg, in.HTTP)
	return s
}

func ptr[T any](v T) *T { return &v }

// lag: messages = pending + ack pending; seconds = age of the first
// message after the ack floor on the consumer's filters, 0 when nothing
// is outstanding, unknown when it cannot be read.
func lag(ctx context.Context, in StatusInput, info *jetstream.ConsumerInfo, now time.Time) LagCheck {
	l := LagCheck{State: StateOK, Messages: ptr(int64(info.NumPending) + int64(info.NumAckPending))}
	if *l.Messages == 0 {
		l.Seconds = ptr(0.0)
	} else {
		filters := info.Config.FilterSubjects
		if info.Config.FilterSubject != "" {
			filters = append(filters, info.Config.FilterSubject)
		}
		if len(filters) == 0 {
			filters = []string{">"}
		}
		var oldest *jsapi.Msg
		unreadable := false
		for _, f := range filters {
			m, err := in.API.GetMsg(ctx, in.Config.NATS.Stream, jsapi.GetMsgRequest{Seq: info.AckFloor.Stream + 1, NextBySubject: f})
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				unreadable = true
				break
			}
			if oldest == nil || m.Seq < oldest.Seq {
				oldest = m
			}
		}
		if !unreadable && oldest != nil {
			l.Seconds = ptr(max(now.Sub(oldest.Time).Seconds(), 0))
		} else if !unreadable {
			l.Seconds = ptr(0.0)
		}
	}
	lim := in.Limits
	switch {
	case lim.MaxLag != nil && *l.Messages > *lim.MaxLag, lim.MaxLagSeconds != nil && l.Seconds != nil && *l.Seconds > *lim.MaxLagSeconds:
		l.State = StateFail
	case l.Seconds == nil:
		l.State = StateUnknown // the age could not be read (not permitted): shown, never failed
	}
	return l
}

// dlqDepth counts the messages on the DLQ subject.
func dlqDepth(ctx context.Context, in StatusInput, natsOK bool) DLQCheck {
	dl := &in.Config.DeadLetter
	if dl.Subject == nil {
		return DLQCheck{State: StateSkipped}
	}
	c := DLQCheck{State: StateUnknown, Subject: *dl.Subject}
	if !natsOK {
		return c
	}
	stream, err := LocateDLQ(ctx, in.API, c.Subject, in.DLQStream)
	if err != nil {
		c.Err = err
		if IsConfigError(err) && dl.Enabled {
			c.State = StateFail
		}
		return c
	}
	c.Stream = stream
	info, err := in.API.StreamInfo(ctx, stream, c.Subject)
	if err != nil {
		c.Err = err
		if errors.Is(err, jetstream.ErrStreamNotFound) && dl.Enabled {
			c.State = StateFail
		}
		return c
	}
	n := info.State.Subjects[c.Subject]
	c.Entries, c.State = &n, StateOK
	if in.Limits.MaxDLQ != nil && n > *in.Limits.MaxDLQ {
		c.State = StateFail
	}
	return c
}

// ReadyzAddress returns the host:port status probes for metrics.listen: an
// empty or wildcard host becomes loopback.
func ReadyzAddress(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// processReady asks a run process's /readyz.
func processReady(ctx context.Context, cfg *config.Config, client *http.Client) ProcessCheck {
	if cfg.Metrics.Listen == nil {
		return ProcessCheck{State: StateSkipped}
	}
	addr := ReadyzAddress(*cfg.Metrics.Listen)
	p := ProcessCheck{State: StateUnknown, Address: addr, Readiness: "unreachable"}
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return p
	}
	resp, err := client.Do(req)
	if err != nil {
		return p
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var r struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &r) != nil || r.Status == "" {
		return p
	}
	p.Readiness = strings.ToLower(r.Status)
	if p.Readiness == "ready" && resp.StatusCode == http.StatusOK {
		p.State = StateOK
	} else {
		p.State = StateFail
	}
	return p
}
