package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/jsapi"
	"github.com/nats-sinks/nats-sink/pipeline"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// opsConn is the NATS connection of an operator command (dlq, status,
// replay): the configuration's nats section, secrets resolved as for run.
type opsConn struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	api *jsapi.Client
}

// connectOps connects with cfg's nats section. A configuration problem
// (an unset secret variable, an unreadable file) is a *config.Error.
func connectOps(env *Env, cfg *config.Config) (*opsConn, error) {
	m, _ := telemetry.NewMetrics(nil, cfg.Metrics.Namespace)
	opts, err := pipeline.NATSOptions(&cfg.NATS, config.Env(env.Getenv), telemetry.NewLogger(env.Stderr, cfg.Logging.Format, "ERROR"), m)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(cfg.NATS.Servers(), ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	js, err := pipeline.NewJetStream(nc, &cfg.NATS)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &opsConn{nc: nc, js: js, api: jsapi.New(nc, jsapi.Prefix(cfg.NATS.Domain, cfg.NATS.APIPrefix))}, nil
}

func (c *opsConn) Close() {
	c.api.Close()
	c.nc.Close()
}

// table prints rows in columns as wide as their widest cell, two spaces
// apart, the last column unpadded.
type table struct{ rows [][]string }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// tableTime is the time form of tables: YYYY-MM-DDTHH:MM:SSZ.
func tableTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
