// Command nats-sink moves messages from a NATS JetStream pull consumer into
// one durable destination and acknowledges each message only after the
// destination has committed it. Run `nats-sink demo` for a zero-setup tour.
package main

import (
	"os"

	"github.com/nats-sinks/nats-sink/cli"
)

func main() { os.Exit(cli.Main()) }
