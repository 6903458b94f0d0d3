// Package builtin lists every sink compiled into nats-sink. It is the only
// package (besides the CLI) that imports all sink drivers, so a library user
// of one sink package pulls in no other driver.
//
// Adding a sink is one package under sinks/ and one line in list below
// (docs/library.md, "Adding a sink").
package builtin

import (
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/sinks/clickhouse"
	"github.com/nats-sinks/nats-sink/sinks/file"
	httpsink "github.com/nats-sinks/nats-sink/sinks/http"
	kafkasink "github.com/nats-sinks/nats-sink/sinks/kafka"
	"github.com/nats-sinks/nats-sink/sinks/mqtt"
	"github.com/nats-sinks/nats-sink/sinks/mysql"
	natssink "github.com/nats-sinks/nats-sink/sinks/nats"
	"github.com/nats-sinks/nats-sink/sinks/oracle"
	"github.com/nats-sinks/nats-sink/sinks/postgres"
	"github.com/nats-sinks/nats-sink/sinks/rabbitmq"
	redissink "github.com/nats-sinks/nats-sink/sinks/redis"
	s3sink "github.com/nats-sinks/nats-sink/sinks/s3"
	"github.com/nats-sinks/nats-sink/sinks/segments"
	"github.com/nats-sinks/nats-sink/sinks/spool"
	"github.com/nats-sinks/nats-sink/sinks/sqlite"
)

// builtin is one compiled-in sink: its sink.type, its Decoder and a pointer
// to its default Config, from whose struct tags the JSON Schema is
// generated.
type builtin struct {
	name      string
	decode    sink.Decoder
	prototype any
}

// list is the one list of built-in sinks, in the order of the
// documentation (sinks.md), which is the order messages list them in.
func list() []builtin {
	return []builtin{
		{"file", file.Decode, ptr(file.Default())},
		{"oracle", oracle.Decode, ptr(oracle.Default())},
		{"mysql", mysql.Decode, ptr(mysql.Default())},
		{"postgres", postgres.Decode, ptr(postgres.Default())},
		{"sqlite", sqlite.Decode, ptr(sqlite.Default())},
		{"http", httpsink.Decode, ptr(httpsink.Default())},
		{"s3", s3sink.Decode, ptr(s3sink.Default())},
		{"kafka", kafkasink.Decode, ptr(kafkasink.Default())},
		{"nats", natssink.Decode, ptr(natssink.Default())},
		{"spool", spool.Decode, ptr(spool.Default())},
		{"redis", redissink.Decode, ptr(redissink.Default())},
		{"rabbitmq", rabbitmq.Decode, ptr(rabbitmq.Default())},
		{"mqtt", mqtt.Decode, ptr(mqtt.Default())},
		{"clickhouse", clickhouse.Decode, ptr(clickhouse.Default())},
		{"segments", segments.Decode, ptr(segments.Default())},
	}
}

// Registry returns a registry holding every built-in sink type.
func Registry() *sink.Registry {
	r := sink.NewRegistry()
	for _, b := range list() {
		r.Register(b.name, b.decode)
	}
	return r
}

// Prototypes returns, per built-in sink type, a pointer to its default
// configuration; the JSON Schema generator reads the struct tags.
func Prototypes() map[string]any {
	out := map[string]any{}
	for _, b := range list() {
		out[b.name] = b.prototype
	}
	return out
}

func ptr[T any](v T) *T { return &v }
