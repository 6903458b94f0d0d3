// Package builtin lists every sink compiled into nats-sink. It is the only
// package (besides the CLI) that imports all sink drivers, so a library user
// of one sink package pulls in no other driver.
package builtin

import (
	"github.com/nats-sinks/nats-sink/sink"
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
	"github.com/nats-sinks/nats-sink/sinks/sqlite"
)

// Registry returns a registry holding every built-in sink type.
func Registry() *sink.Registry {
	r := sink.NewRegistry()
	r.Register("file", file.Decode)
	r.Register("http", httpsink.Decode)
	r.Register("kafka", kafkasink.Decode)
	r.Register("mqtt", decodeWithDeps(mqtt.Decode))
	r.Register("mysql", mysql.Decode)
	r.Register("nats", natssink.Decode)
	r.Register("oracle", oracle.Decode)
	r.Register("postgres", postgres.Decode)
	r.Register("rabbitmq", decodeWithDeps(rabbitmq.Decode))
	r.Register("redis", decodeWithDeps(redissink.Decode))
	r.Register("s3", s3sink.Decode)
	r.Register("sqlite", sqlite.Decode)
	return r
}

// Prototypes returns, per built-in sink type, a pointer to its default
// configuration; the JSON Schema generator reads the struct tags.
func Prototypes() map[string]any {
	fileDefault, httpDefault, mysqlDefault, oracleDefault := file.Default(), httpsink.Default(), mysql.Default(), oracle.Default()
	natsDefault, postgresDefault, sqliteDefault := natssink.Default(), postgres.Default(), sqlite.Default()
	s3Default := s3sink.Default()
	kafkaDefault := kafkasink.Default()
	redisDefault, rabbitmqDefault, mqttDefault := redissink.Default(), rabbitmq.Default(), mqtt.Default()
	return map[string]any{
		"file":     &fileDefault,
		"http":     &httpDefault,
		"kafka":    &kafkaDefault,
		"mqtt":     &mqttDefault,
		"mysql":    &mysqlDefault,
		"nats":     &natsDefault,
		"oracle":   &oracleDefault,
		"postgres": &postgresDefault,
		"rabbitmq": &rabbitmqDefault,
		"redis":    &redisDefault,
		"s3":       &s3Default,
		"sqlite":   &sqliteDefault,
	}
}
