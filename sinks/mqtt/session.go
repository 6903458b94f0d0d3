package mqtt

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/eclipse/paho.golang/packets"
	pahosession "github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"
)

// watchedSession is the client's in-memory session state (paho's own), watched
// for two things paho does not report to a publisher:
//
//   - A QoS 2 PUBREC with reason 0x10 (no matching subscribers): the flow
//     then continues to a PUBCOMP with reason 0x00, and the 0x10 would be
//     lost, so require_subscribers could not be honoured at QoS 2.
//   - A reconnect whose CONNACK says the broker no longer has the session:
//     paho drops its unacknowledged flows without answering their
//     publishers, which would then wait for publish_timeout_ms; they are
//     told at once instead (Temporary: the broker may or may not have
//     routed them).
//
// Each publish carries a *flight in its context; AddToSession learns its
// packet identifier.
type watchedSession struct {
	*state.State

	mu      sync.Mutex
	flights map[uint16]*flight
}

var _ pahosession.SessionManager = (*watchedSession)(nil)

func newSession() *watchedSession {
	return &watchedSession{State: state.NewInMemory(), flights: map[uint16]*flight{}}
}

// flight is what the sink learns about one publish beyond paho's answer.
type flight struct {
	noSubscribers atomic.Bool
	sessionLost   atomic.Bool
	cancel        context.CancelFunc // ends the publish when the session is lost
}

type flightKey struct{}

func withFlight(ctx context.Context, f *flight) context.Context {
	return context.WithValue(ctx, flightKey{}, f)
}

// AddToSession records the packet identifier of a PUBLISH that carries a
// flight. The identifier is assigned by the inner call and the PUBLISH is
// written only after it returns, so no answer can precede the record.
func (s *watchedSession) AddToSession(ctx context.Context, packet pahosession.Packet, resp chan<- packets.ControlPacket) error {
	if err := s.State.AddToSession(ctx, packet, resp); err != nil {
		return err
	}
	if pb, ok := packet.(*packets.Publish); ok {
		if f, ok := ctx.Value(flightKey{}).(*flight); ok {
			s.mu.Lock()
			s.flights[pb.PacketID] = f
			s.mu.Unlock()
		}
	}
	return nil
}

// PacketReceived notes a PUBREC 0x10 on its flight and forgets a flight
// once its final answer arrived, before paho frees the identifier.
func (s *watchedSession) PacketReceived(recv *packets.ControlPacket, pubChan chan<- *packets.Publish) error {
	switch p := recv.Content.(type) {
	case *packets.Pubrec:
		s.mu.Lock()
		if f := s.flights[p.PacketID]; f != nil {
			if p.ReasonCode == packets.PubrecNoMatchingSubscribers {
				f.noSubscribers.Store(true)
			}
			if p.ReasonCode >= 0x80 {
				delete(s.flights, p.PacketID)
			}
		}
		s.mu.Unlock()
	case *packets.Puback:
		s.forget(p.PacketID)
	case *packets.Pubcomp:
		s.forget(p.PacketID)
	}
	return s.State.PacketReceived(recv, pubChan)
}

func (s *watchedSession) forget(id uint16) {
	s.mu.Lock()
	delete(s.flights, id)
	s.mu.Unlock()
}

// ConAckReceived ends every flight when the broker did not keep the
// session, then lets paho resend what it still holds.
func (s *watchedSession) ConAckReceived(conn io.Writer, cp *packets.Connect, ca *packets.Connack) error {
	if !ca.SessionPresent {
		s.mu.Lock()
		for id, f := range s.flights {
			f.sessionLost.Store(true)
			f.cancel()
			delete(s.flights, id)
		}
		s.mu.Unlock()
	}
	return s.State.ConAckReceived(conn, cp, ca)
}
