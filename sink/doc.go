// Package sink is the contract between the nats-sink runner and the
// destinations it writes to. It imports only the standard library, as
// database/sql/driver does, so a sink implementation pulls in nothing but its
// own driver.
//
// # The acknowledgement contract
//
// The runner acknowledges a JetStream message only after everything required
// for it has durably happened: its sink reported it Committed (or Duplicate,
// already present), or its dead-letter record was published and the DLQ
// publish was acknowledged by JetStream. In every other case the message stays
// unacknowledged and JetStream redelivers it.
//
// Consequences for a Sink:
//
//   - Delivery is at-least-once. A crash between commit and ACK redelivers a
//     message that is already written, so every sink defines a duplicate model
//     (deterministic file names, primary keys, idempotency keys).
//   - A sink never sees ACK primitives: it receives Envelopes and returns one
//     Result per envelope.
//   - An unknown outcome (timeout, connection lost during COMMIT, cancelled
//     context) is Temporary. Reporting Committed for a record that is not
//     durable loses data; reporting Temporary for one that is only writes it
//     twice.
//
// # The boundary between a sink and its host
//
// A sink package imports this package, its own driver and leaf helpers,
// never the host's configuration loader, metrics registry or tracing SDK.
// Its Config is its Opener: Decode builds it from the "sink" object of a
// configuration file, a program may build it in Go, and Open validates it
// either way before starting the sink. What the sink needs from the host
// (environment, logger, metrics, tracer, the source it consumes, the drain
// bound) arrives in Deps. Configuration problems are a *ConfigError with
// paths relative to the sink object; errors.Is(err, ErrConfig) recognises
// every configuration error.
package sink
