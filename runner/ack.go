package runner

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultAckConfirmationTimeout is delivery.ack_confirmation.timeout_ms's
// default.
const DefaultAckConfirmationTimeout = time.Second

// ackConfirmParallel bounds the confirmations of one batch awaited at once
// (docs/delivery.md#ack-order: up to 64). One confirmation is a round trip; awaiting them
// one after another caps a batch at ~24k ACKs/s on the reference box
// (platform facts: sequential DoubleAck).
const ackConfirmParallel = 64

// AckConfirmation configures confirmed ACKs (delivery.ack_confirmation,
// docs/delivery.md#ack-order): every ACK is a request the server answers once it applied
// the ACK (what nats.go's DoubleAck sends), so an ACK lost on the way is
// seen, counted and logged instead of silently causing a redelivery later.
//
// delivery.ack_confirmation.unsupported_action has no field: nats.go's
// jetstream client always supports confirmed ACKs, so the action never
// applies.
type AckConfirmation struct {
	// Timeout bounds the wait for each confirmation; 0 means 1 s.
	Timeout time.Duration
}

func (a *AckConfirmation) timeout() time.Duration {
	if a.Timeout <= 0 {
		return DefaultAckConfirmationTimeout
	}
	return a.Timeout
}

// settle ACKs the committed messages acks and ACKs or TERMs the dead-lettered
// messages dead, all in delivery order (docs/delivery.md#ack-order), then flushes so the
// batch's ACKs have left the client before its slot is released.
//
// With AckConfirmation each ACK waits for the server's reply; they are sent
// in delivery order and up to 64 are awaited at once (confirmAcks). TERMs are never confirmed
// (ack_confirmation_unsupported_total). An ACK or TERM that fails, or whose
// confirmation fails or times out, is counted and logged, and the message is
// left alone: if the ACK never arrived, the server redelivers it after
// AckWait and the sink's duplicate model absorbs the second write; it is
// never NAKed, since it is committed. Once ctx is done (the shutdown timeout
// passed) ACKs are sent unconfirmed, so a confirmation wait cannot stretch
// the shutdown.
func (r *Runner) settle(ctx context.Context, b *batch, acks, dead []int, log *slog.Logger) {
	if len(acks)+len(dead) == 0 {
		return
	}
	m := r.metrics()
	term := r.DeadLetter != nil && r.DeadLetter.TermAfterPublish
	confirm := r.AckConfirmation != nil && ctx.Err() == nil
	isDead := make(map[int]bool, len(dead))
	for _, i := range dead {
		isDead[i] = true
	}
	order := append(slices.Clone(acks), dead...)
	slices.Sort(order)

	ackFailed := func(i int, err error) {
		m.AckErrors.Inc()
		_, seq := b.where(i)
		log.Warn("ack failed", "stream_sequence", seq, "error", err.Error())
		r.failFast("ack", err)
	}

	var (
		termTime time.Duration
		termed   int
	)
	// sendTerm TERMs message i; TERMs are never confirmed.
	sendTerm := func(i int) {
		start := time.Now()
		err := b.msgs[i].Term()
		termTime += time.Since(start)
		termed++
		if r.AckConfirmation != nil {
			m.AckConfirmationUnsupported.Inc()
		}
		span := b.tr.Span(i)
		span.Term(err)
		span.End()
		if err != nil {
			m.TermErrors.Inc()
			_, seq := b.where(i)
			log.Warn("term failed", "stream_sequence", seq, "error", err.Error())
			r.failFast("term", err)
		} else {
			m.MessagesTerminated.Inc()
			r.report(b, i, SettledDeadLettered)
		}
	}
	isTerm := func(i int) bool { return isDead[i] && term }
	ackStart := time.Now()
	for _, i := range order {
		b.settled[i] = true
	}
	if confirm {
		errs := r.confirmAcks(b, order, func(i int) bool {
			if isTerm(i) {
				sendTerm(i)
				return true
			}
			return false
		})
		for k, i := range order {
			if isTerm(i) {
				continue
			}
			ackTraced(b, i, errs[k])
			if errs[k] != nil {
				ackFailed(i, errs[k])
			} else {
				m.MessagesAcked.Inc()
				r.report(b, i, settlementOf(b, i, isDead[i]))
			}
		}
	} else {
		for _, i := range order {
			if isTerm(i) {
				sendTerm(i)
				continue
			}
			err := b.msgs[i].Ack()
			ackTraced(b, i, err)
			if err != nil {
				ackFailed(i, err)
			} else {
				m.MessagesAcked.Inc()
				r.report(b, i, settlementOf(b, i, isDead[i]))
			}
		}
	}
	acked := len(order) - termed
	if acked > 0 {
		m.MessageAckSeconds.Observe((time.Since(ackStart) - termTime).Seconds())
	}
	if termed > 0 {
		m.MessageTermSeconds.Observe(termTime.Seconds())
	}
	r.flush(log)
}

// settlementOf is the settlement of an ACKed message i.
func settlementOf(b *batch, i int, dead bool) Settlement {
	switch {
	case dead:
		return SettledDeadLettered
	case b.dup[i]:
		return SettledDuplicate
	}
	return SettledWritten
}

// ackTraced ends message i's span with its ack event; err is the ACK's (or
// its confirmation's) failure. The outcome attribute was set when the
// message was committed or dead-lettered.
func ackTraced(b *batch, i int, err error) {
	s := b.tr.Span(i)
	s.Ack(err)
	s.End()
}

// errAckTimeout is a confirmation that did not arrive within the timeout.
var errAckTimeout = errors.New("ack confirmation timed out")

// confirmAcks sends the ACKs of the messages order, in that (delivery)
// order, as requests whose replies come to one inbox, and waits for the
// server's confirmations with at most 64 outstanding (docs/delivery.md#ack-order). A message
// for which inline returns true was handled by inline (a TERM) and is
// skipped. It returns one error per position of order: nil when confirmed
// or skipped.
//
// This is nats.go's DoubleAck (a "+ACK" request to the message's reply
// subject) pipelined: DoubleAck blocks for its round trip, so issuing the
// ACKs in delivery order would serialise them, and a goroutine per ACK
// costs more than the round trip saved.
func (r *Runner) confirmAcks(b *batch, order []int, inline func(i int) bool) []error {
	m := r.metrics()
	errs := make([]error, len(order))
	skipped := make([]bool, len(order))
	failAll := func(from int, err error) {
		for k := from; k < len(order); k++ {
			if skipped[k] || inline(order[k]) {
				skipped[k] = true
				continue
			}
			m.AckConfirmationAttempts.Inc()
			m.AckConfirmationFailures.Inc()
			errs[k] = err
		}
	}
	nc := r.Conn
	inbox := nc.NewInbox()
	replies := make(chan *nats.Msg, len(order))
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		failAll(0, err)
		return errs
	}
	defer func() { _ = sub.Unsubscribe() }()
	timeout := r.AckConfirmation.timeout()
	sent := make([]time.Time, len(order))
	done := make([]bool, len(order))
	var (
		next        int // next message to publish
		oldest      int // oldest request that may still be outstanding
		outstanding int // published, neither confirmed nor timed out
		timer       *time.Timer
	)
	finish := func(k int, err error) {
		done[k] = true
		outstanding--
		errs[k] = err
		switch {
		case err == nil:
			m.AckConfirmationSuccesses.Inc()
		case errors.Is(err, errAckTimeout):
			m.AckConfirmationTimeouts.Inc()
		default:
			m.AckConfirmationFailures.Inc()
		}
		m.AckConfirmationSeconds.Observe(time.Since(sent[k]).Seconds())
	}
	// wait blocks for one reply or for the oldest request's deadline.
	wait := func() {
		for oldest < next && done[oldest] {
			oldest++
		}
		d := time.Until(sent[oldest].Add(timeout))
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case msg := <-replies:
			timer.Stop()
			k, err := strconv.Atoi(msg.Subject[len(inbox)+1:])
			if err != nil || k < 0 || k >= next || done[k] {
				return // late reply to a request that already timed out
			}
			var rerr error
			if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
				rerr = nats.ErrNoResponders // the consumer is gone
			}
			finish(k, rerr)
		case <-timer.C:
			// Every request has the same timeout, so the oldest is the
			// first to expire.
			finish(oldest, errAckTimeout)
		}
	}
	for next < len(order) {
		if outstanding >= ackConfirmParallel {
			wait()
			continue
		}
		if inline(order[next]) {
			skipped[next], done[next] = true, true
			next++
			continue
		}
		msg := b.msgs[order[next]]
		m.AckConfirmationAttempts.Inc()
		sent[next] = time.Now()
		if err := nc.PublishRequest(msg.Reply(), inbox+"."+strconv.Itoa(next), ackBody); err != nil {
			// Disconnected with the reconnect buffer full or disabled, or
			// closed: this and every later ACK fails the same way; those
			// already sent may still be confirmed.
			m.AckConfirmationFailures.Inc()
			errs[next], done[next] = err, true
			failAll(next+1, err)
			for k := next; k < len(order); k++ {
				done[k] = true
			}
			next = len(order)
			break
		}
		next++
		outstanding++
	}
	for outstanding > 0 {
		wait()
	}
	return errs
}

// ackBody is the JetStream ACK ("+ACK", as nats.go sends it).
var ackBody = []byte("+ACK")
