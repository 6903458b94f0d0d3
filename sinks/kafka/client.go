package kafkasink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// metadataMinAge bounds how often the producer refreshes metadata after an
// error. franz-go's 5 s default makes an unknown topic take about 20 s to
// report (four refreshes); 1 s reports it within a few seconds and still
// keeps a failing sink from flooding the cluster with metadata requests.
const metadataMinAge = time.Second

// clientOptions returns the franz-go options of c: an idempotent producer
// (franz-go's default, never disabled here) with acks from all in-sync
// replicas, the key-hash partitioner, the codec, the size limit, TLS and
// SASL. Secrets and TLS files are read here, when the sink opens.
func (c *Config) clientOptions(deps sink.Deps) ([]kgo.Opt, error) {
	codec := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}[c.Compression]
	timeout := time.Duration(c.ProduceTimeoutMS) * time.Millisecond
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Keyed records hash with murmur2 like the Java client, so the same
		// key always lands in the same partition: a redelivered message's
		// second record sits beside its first, where a compacted topic or
		// a de-duplicating consumer finds it.
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(64<<10, true, true, nil)),
		kgo.ProducerBatchCompression(codec),
		// Every batch fits max_record_bytes, so the default limit (just
		// under Kafka's default max.message.bytes) never produces a batch
		// the broker refuses for its size.
		kgo.ProducerBatchMaxBytes(int32(c.MaxRecordBytes)),
		kgo.BrokerMaxWriteBytes(int32(max(100<<20, c.MaxRecordBytes+1<<20))),
		// No RecordDeliveryTimeout: franz-go measures it from the record's
		// timestamp, which is the message's creation time here, so an old
		// message would time out before it was sent. WriteBatch bounds
		// each record with its context instead.
		kgo.ProduceRequestTimeout(min(timeout, 30*time.Second)),
		kgo.MetadataMinAge(metadataMinAge),
		kgo.ProducerLinger(0),
		// The sink never asks the cluster to create a topic
		// (AllowAutoTopicCreation is not set): a typo in a topic name is a
		// Destination error, not a new topic.
	}
	if c.TLS.Enabled {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL.Mechanism != "none" {
		mech, err := c.saslMechanism(deps)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// tlsConfig builds the TLS configuration from the tls object. An unreadable
// or invalid file is a configuration error naming the key and path.
func (c *Config) tlsConfig() (*tls.Config, error) {
	t := c.TLS
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != nil {
		pem, err := os.ReadFile(*t.CAFile)
		if err != nil {
			return nil, configError("tls.ca_file", fmt.Sprintf("cannot read CA file: %v", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, configError("tls.ca_file", fmt.Sprintf("no PEM certificate in %s", *t.CAFile))
		}
		tc.RootCAs = pool
	}
	if t.CertFile != nil && t.KeyFile != nil {
		cert, err := tls.LoadX509KeyPair(*t.CertFile, *t.KeyFile)
		if err != nil {
			// The error names the files and what failed, never key bytes.
			return nil, configError("tls.cert_file", fmt.Sprintf("cannot load the client certificate and key: %v", err))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// saslMechanism resolves the password (from password_env or password_file)
// and returns the configured mechanism. An unset variable or unreadable
// file is a *sink.ConfigError at sasl.password_env or sasl.password_file.
func (c *Config) saslMechanism(deps sink.Deps) (sasl.Mechanism, error) {
	s := c.SASL
	pw, ok, err := secret.Resolve("sasl.password", nil, s.PasswordEnv, s.PasswordFile, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	if !ok || pw.Reveal() == "" {
		return nil, configError("sasl.password_env", "the SASL password must not be empty")
	}
	user := *s.Username
	switch s.Mechanism {
	case "plain":
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			return plain.Auth{User: user, Pass: pw.Reveal()}, nil
		}), nil
	case "scram-sha-256":
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			return scram.Auth{User: user, Pass: pw.Reveal()}, nil
		}), nil
	default: // scram-sha-512
		return scram.Sha512(func(context.Context) (scram.Auth, error) {
			return scram.Auth{User: user, Pass: pw.Reveal()}, nil
		}), nil
	}
}

// configError is a start-time configuration problem at path (relative to
// the sink object); the CLI exits 2 for it.
func configError(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}
