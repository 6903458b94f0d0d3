// Package redissink is the Redis Streams sink: every message becomes one
// stream entry (XADD), added by a Lua script that first looks for the
// message's dedupe key, so a redelivery within dedupe_window_ms is reported
// Duplicate and adds no second entry. A message is Committed when Redis
// replied to its write (and, with wait_replicas, when WAIT counted that many
// replicas): Redis applies a write in memory before replying, so surviving a
// server restart is the server's persistence setting (docs/brokers.md).
//
// The directory is sinks/redis; the package is named redissink so that it
// does not read as the client library in importers.
package redissink

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/brokerconfig"
	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/sink"
)

// MaxRecordBytes is the largest max_record_bytes: Redis' default limit on
// one bulk string (proto-max-bulk-len, 512 MiB).
const MaxRecordBytes = 536870912

// Config is the redis sink's configuration. Default returns it with every
// default; Decode fills it from a "sink" object.
type Config struct {
	Type    string `json:"type" trim:"true" lower:"true" enum:"redis" doc:"Sink type."`
	Address string `json:"address" nonblank:"true" nopad:"true" nocontrol:"true" doc:"Redis server host:port (a standalone server, or a proxy presenting one)."`
	DB      int    `json:"db" min:"0" max:"1024" doc:"Database number (SELECT)."`
	brokerconfig.Auth
	TLS             brokerconfig.TLS `json:"tls" doc:"TLS to the server."`
	StreamKey       string           `json:"stream_key" nonblank:"true" doc:"Stream key template: literal text plus {subject}, {stream}, {token:N}; rendered 1 to 1024 bytes."`
	MaxLen          *int64           `json:"maxlen" min:"1" max:"1000000000000" doc:"Trim each stream to about this many entries (XADD MAXLEN ~); trimmed entries are gone. null = no trimming."`
	MaxLenExact     bool             `json:"maxlen_exact" doc:"Trim to exactly maxlen entries (MAXLEN =), which costs more per add."`
	DedupeWindowMS  int64            `json:"dedupe_window_ms" min:"0" max:"604800000" doc:"How long a message's dedupe key makes its redelivery a Duplicate without a second entry; 0 = no dedupe keys."`
	DedupeKeyPrefix string           `json:"dedupe_key_prefix" doc:"Prefix of the dedupe keys (1 to 128 printable ASCII characters)."`
	WaitReplicas    int              `json:"wait_replicas" min:"0" max:"16" doc:"Replicas that must acknowledge a batch's writes (WAIT) before it is committed; 0 = none."`
	WaitTimeoutMS   int              `json:"wait_timeout_ms" min:"1" max:"60000" doc:"How long WAIT waits for wait_replicas."`
	PoolSize        int              `json:"pool_size" min:"1" max:"256" doc:"Connections; each in-flight batch uses one."`
	DialTimeoutMS   int              `json:"dial_timeout_ms" min:"100" max:"60000" doc:"Connection timeout."`
	brokerconfig.Options
	MaxRecordBytes int `json:"max_record_bytes" min:"1024" max:"536870912" doc:"Largest record (body plus fields); a larger message is dead-lettered (PermanentSinkError)."`
}

// Default returns the configuration with every default.
func Default() Config {
	return Config{
		Type:            "redis",
		Address:         "127.0.0.1:6379",
		StreamKey:       "nats:{subject}",
		DedupeWindowMS:  120000,
		DedupeKeyPrefix: "nats-sink:dedupe:",
		WaitTimeoutMS:   1000,
		PoolSize:        4,
		DialTimeoutMS:   5000,
		Options:         brokerconfig.DefaultOptions("envelope"),
		MaxRecordBytes:  brokerconfig.DefaultMaxRecordBytes,
	}
}

// Decode validates one redis "sink" object without I/O and returns its
// Config. Problems come back as one *sink.ConfigError with paths relative to
// the sink object. The password is read by Open, not here.
func Decode(raw json.RawMessage) (sink.Opener, error) {
	c := Default()
	if err := fields.DecodeSink(raw, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Open starts the sink; it is New behind the sink.Opener interface.
func (c Config) Open(ctx context.Context, deps sink.Deps) (sink.Sink, error) {
	s, err := New(ctx, c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks c: the rules of the struct tags and, when they pass, the
// rules between keys. Problems have paths relative to the sink object and
// come back as one *sink.ConfigError, or nil. Decode runs it on the decoded
// object, New before anything else, so a Config built in Go is checked like
// a loaded one.
func (c *Config) Validate() error { return fields.Validate(c, c.rules) }

// rules checks what the struct tags cannot express.
func (c *Config) rules(p *fields.Problems) {
	var ck broker.Checker
	if msg := checkAddress(c.Address); msg != "" {
		ck.Add("address", msg)
	}
	ck.Append(c.Auth.Rules(true))
	ck.Append(c.TLS.Rules(c.TLS.Enabled))
	if _, err := broker.ParseTemplate(c.StreamKey, broker.Raw); err != nil {
		ck.Add("stream_key", err.Error())
	} else if c.StreamKey == "" {
		ck.Add("stream_key", "must not be empty")
	}
	if c.MaxLenExact && c.MaxLen == nil {
		ck.Add("maxlen_exact", "requires maxlen")
	}
	if n := len(c.DedupeKeyPrefix); n < 1 || n > 128 || strings.ContainsFunc(c.DedupeKeyPrefix, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		ck.Add("dedupe_key_prefix", "must be 1 to 128 printable ASCII characters")
	}
	for _, pr := range ck.Problems() {
		p.Add(pr.Path, pr.Message)
	}
}

// checkAddress returns the problem with a host:port address, or "".
func checkAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Sprintf("must be host:port (got %q)", a)
	}
	if strings.ContainsAny(host, "/@ ") {
		return fmt.Sprintf("host must be a host name or IP address (got %q)", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port must be between 1 and 65535 (got %q)", port)
	}
	return ""
}
