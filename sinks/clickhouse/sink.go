package clickhouse

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/internal/urlcheck"
	"github.com/nats-sinks/nats-sink/secret"
	"github.com/nats-sinks/nats-sink/sink"
)

// Sink writes batches to ClickHouse. It is safe for concurrent WriteBatch
// calls.
type Sink struct {
	cfg      Config
	model    *model
	client   *client
	features features
	log      *slog.Logger
	timeout  time.Duration
	maxRows  int
	maxBytes int
	metrics  metrics
	// now is the row build time (stored_at); tests replace it.
	now func() time.Time
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// New validates c, resolves its password, and starts the sink: feature
// detection, auto_create, and the table and column checks. A configuration
// mismatch found on the server is a *sink.ConfigError; an unreachable or
// refusing server is a plain error.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := c.compile(&fields.Problems{})
	log := deps.Log().With("sink", "clickhouse")
	password, err := c.password(deps)
	if err != nil {
		return nil, err
	}
	tlsConf, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(c.URL)
	if u.Scheme == "http" && !urlcheck.IsLoopbackName(strings.ToLower(u.Hostname())) {
		log.Warn("clickhouse url uses plain http to a remote host: credentials and rows travel unencrypted", "host", u.Hostname())
	}
	if c.TLS.InsecureSkipVerify {
		log.Warn("clickhouse tls.insecure_skip_verify is set: the server certificate is not verified")
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConf,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false, // ClickHouse speaks HTTP/1.1
	}
	s := &Sink{
		cfg:   c,
		model: m,
		client: &client{
			base:      strings.TrimRight(c.URL, "?"),
			http:      &http.Client{Transport: transport},
			auth:      "Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+password)),
			userAgent: userAgent(),
			gzip:      c.Compression == "gzip",
		},
		log:      log,
		timeout:  time.Duration(c.RequestTimeoutMS) * time.Millisecond,
		maxBytes: c.MaxRequestBytes,
		metrics:  newMetrics(deps.Meter()),
		now:      time.Now,
	}
	if c.MaxRowsPerInsert != nil {
		s.maxRows = *c.MaxRowsPerInsert
	}
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.startup(sctx); err != nil {
		transport.CloseIdleConnections()
		if classify(err) == classDestination {
			// Authentication, access, a missing table, a certificate
			// that does not verify: retrying does not help.
			err = sink.AsDestination(err)
		}
		return nil, err
	}
	for _, t := range m.tables {
		names := make([]string, len(t.cols))
		for i, col := range t.cols {
			names[i] = quote(col.name)
			col.jsonKey = append(jsonx.AppendString(nil, col.name, jsonx.UTF8), ':')
		}
		t.insertSQL = "INSERT INTO " + t.qualified(m.db) + " (" + strings.Join(names, ", ") + ") FORMAT JSONEachRow"
	}
	return s, nil
}

// password resolves password, password_env or password_file (through
// deps); none is the empty password.
func (c *Config) password(deps sink.Deps) (string, error) {
	v, _, err := secret.Resolve("password", c.Password, c.PasswordEnv, c.PasswordFile, deps.LookupEnv)
	return v.Reveal(), err
}

func configProblem(path, msg string) error {
	return &sink.ConfigError{Problems: []sink.Problem{{Path: path, Message: msg}}}
}

// tlsConfig builds the client TLS configuration of an https URL.
func (c *Config) tlsConfig() (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.TLS.InsecureSkipVerify} //nolint:gosec // opt-in, logged
	if c.TLS.ServerName != nil {
		conf.ServerName = *c.TLS.ServerName
	}
	if c.TLS.CAFile != nil {
		pem, err := os.ReadFile(*c.TLS.CAFile)
		if err != nil {
			return nil, configProblem("tls.ca_file", fmt.Sprintf("cannot read: %v", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, configProblem("tls.ca_file", "holds no PEM certificate")
		}
		conf.RootCAs = pool
	}
	if c.TLS.CertFile != nil && c.TLS.KeyFile != nil {
		cert, err := tls.LoadX509KeyPair(*c.TLS.CertFile, *c.TLS.KeyFile)
		if err != nil {
			return nil, configProblem("tls.cert_file", fmt.Sprintf("cannot load the client certificate and key: %v", err))
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// Type returns "clickhouse".
func (s *Sink) Type() string { return "clickhouse" }

// Healthcheck runs SELECT 1.
func (s *Sink) Healthcheck(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := s.client.do(ctx, "health check", nil, []byte("SELECT 1"), "text/plain; charset=utf-8", 1024)
	if err != nil {
		if classify(err) == classDestination {
			return sink.AsDestination(err)
		}
		return err
	}
	if strings.TrimSpace(string(b)) != "1" {
		return errors.New("clickhouse health check: SELECT 1 did not return 1")
	}
	return nil
}

// Stop closes idle connections.
func (s *Sink) Stop(context.Context) error {
	s.client.http.CloseIdleConnections()
	return nil
}

// group is the rows of one table in one batch: their JSONEachRow lines in
// one buffer, in delivery order.
type group struct {
	t    *table
	buf  []byte
	ends []int    // end offset of each row in buf
	idx  []int    // each row's position in the batch
	keys []string // each row's core idempotency key, for the token
}

// WriteBatch builds every row (a message whose row cannot be built is
// Permanent alone), groups them per table in first-appearance order, and
// sends one INSERT per table, or per slice of max_rows_per_insert rows and
// max_request_bytes bytes, in order:
//
//   - 200: the INSERT's rows are Committed (wait_end_of_query=1 makes the
//     status wait for the end of the insert);
//   - a row-content exception: its rows get one Shared Permanent result,
//     which the runner bisects to the row the server refuses, and the next
//     INSERT proceeds (a refused INSERT stores nothing);
//   - anything else: its rows are Temporary or Destination and the
//     remaining INSERTs NotAttempted.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	var groups []*group
	byTable := map[*table]*group{}
	stored := s.now()
	for i, e := range batch {
		t := s.model.resolve(e.Subject)
		g := byTable[t]
		if g == nil {
			g = &group{t: t}
			byTable[t] = g
			groups = append(groups, g)
		}
		start := len(g.buf)
		buf, err := s.appendRow(g.buf, t, e, stored)
		if err == nil && len(buf)-start > s.maxBytes {
			err = sink.AsPermanent(errors.New("row exceeds max_request_bytes"))
		}
		if err != nil {
			results[i] = sink.Failed(fmt.Errorf("clickhouse row for subject %s (stream seq %d): %w", e.Subject, e.StreamSequence, err))
			g.buf = buf[:start]
			continue
		}
		var key string // the token's material, only where the server takes one
		if s.features.token {
			key, _ = record.CoreKey(e)
		}
		g.buf = buf
		g.ends = append(g.ends, len(buf))
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, key)
	}

	stopped := false
	for _, g := range groups {
		first := 0
		for first < len(g.idx) {
			last := s.cut(g, first)
			rows := g.idx[first:last]
			if stopped {
				for _, i := range rows {
					results[i] = sink.Result{Outcome: sink.NotAttempted, Err: errors.New("clickhouse: not attempted after an earlier INSERT of the batch failed")}
				}
				first = last
				continue
			}
			start := 0
			if first > 0 {
				start = g.ends[first-1]
			}
			res := s.insert(ctx, g.t, g.buf[start:g.ends[last-1]], g.keys[first:last])
			for _, i := range rows {
				results[i] = res
			}
			if res.Outcome == sink.Temporary || res.Outcome == sink.Destination {
				stopped = true
			}
			first = last
		}
	}
	return results
}

// cut returns the end (exclusive) of the INSERT that starts at row first:
// at most maxRows rows and maxBytes bytes, and at least one row (a row
// larger than maxBytes never got here).
func (s *Sink) cut(g *group, first int) int {
	start := 0
	if first > 0 {
		start = g.ends[first-1]
	}
	last := first + 1
	for last < len(g.idx) {
		if s.maxRows > 0 && last-first >= s.maxRows {
			break
		}
		if g.ends[last]-start > s.maxBytes {
			break
		}
		last++
	}
	return last
}

// insert sends one INSERT and returns the result for each of its rows.
func (s *Sink) insert(ctx context.Context, t *table, body []byte, keys []string) sink.Result {
	if err := ctx.Err(); err != nil {
		return sink.Result{Outcome: sink.Temporary, Err: fmt.Errorf("clickhouse insert into %s not sent: %w", t.qualified(s.model.db), err)}
	}
	params := url.Values{
		"query":                            {t.insertSQL},
		"wait_end_of_query":                {"1"},
		"input_format_skip_unknown_fields": {"0"},
		"input_format_allow_errors_num":    {"0"},
		"input_format_allow_errors_ratio":  {"0"},
	}
	f := s.features
	if f.asyncInsert {
		params.Set("async_insert", "0")
	}
	if f.nullAsDefault {
		params.Set("input_format_null_as_default", "0")
	}
	if f.distributedSync {
		params.Set("insert_distributed_sync", "1")
	}
	if f.token {
		if tok, ok := dedupToken(t.insertSQL, keys); ok {
			params.Set("insert_deduplicate", "1")
			params.Set("insert_deduplication_token", tok)
		}
	}
	if q := s.cfg.InsertQuorum; q != nil {
		params.Set("insert_quorum", strconv.Itoa(*q))
		params.Set("insert_quorum_timeout", strconv.Itoa(s.cfg.RequestTimeoutMS))
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	_, err := s.client.do(rctx, "insert into "+t.qualified(s.model.db), params, body, "application/x-ndjson", maxErrorBody)
	if err == nil {
		s.metrics.insertSeconds.Observe(time.Since(start).Seconds())
		s.metrics.rows.Add(len(keys))
		return sink.Ok
	}
	cl := classify(err)
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		cl = classTemporary // interrupted: the outcome is unknown
	}
	s.metrics.errors(cl).Add(1)
	return result(cl, fmt.Errorf("%w (%d rows)", err, len(keys)))
}

// dedupToken is the insert_deduplication_token of one INSERT: hex SHA-256
// of a version line, the query and each row's core key. ok is false unless
// every key names a stream sequence: a reused message id with new content
// must never make the server drop new data.
func dedupToken(query string, keys []string) (string, bool) {
	h := sha256.New()
	h.Write([]byte("nats-sink:clickhouse:v1\n" + query + "\n"))
	for _, k := range keys {
		if !strings.HasPrefix(k, "stream-sequence:") {
			return "", false
		}
		h.Write([]byte(k + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// appendRow appends e's JSONEachRow line for table t to dst.
func (s *Sink) appendRow(dst []byte, t *table, e *sink.Envelope, stored time.Time) ([]byte, error) {
	var payload any
	if t.needsPayload {
		var err error
		if payload, err = mapping.Payload(e, record.PayloadMode(s.cfg.PayloadMode)); err != nil {
			return dst, err
		}
	}
	var audit [sqlmodel.NumFields]any
	var err error
	if t.texts {
		audit, err = s.model.rows.Values(e, t.audit, stored, nil)
	} else {
		audit, err = s.model.rows.ScalarValues(e, t.audit, stored)
	}
	if err != nil {
		return dst, err
	}
	dst = append(dst, '{')
	for i, col := range t.cols {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, col.jsonKey...)
		if col.mc == nil {
			dst = appendAudit(dst, audit[col.field])
			continue
		}
		v, err := col.mc.Value(e, payload)
		if err != nil {
			return dst, err
		}
		enc := t.enc[i]
		if v != nil {
			if reason := enc.rangeProblem(v); reason != "" {
				return dst, sink.AsPermanentType(sink.ValidationError,
					fmt.Errorf("mapping column %q (path %q): %s", col.mc.Name, col.mc.Path, reason))
			}
		}
		dst = enc.append(dst, v)
	}
	return append(dst, '}', '\n'), nil
}

func appendAudit(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return jsonx.AppendString(dst, x, jsonx.UTF8)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	}
	return append(dst, "null"...)
}

// append writes one converted mapping value (nil = null).
func (e encoder) append(dst []byte, v any) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	switch e.enc {
	case encString:
		switch x := v.(type) {
		case string:
			return jsonx.AppendString(dst, x, jsonx.UTF8)
		case mapping.JSONText:
			return jsonx.AppendString(dst, string(x), jsonx.UTF8)
		}
	case encInt:
		return strconv.AppendInt(dst, v.(int64), 10)
	case encFloat:
		return strconv.AppendFloat(dst, v.(float64), 'g', -1, 64)
	case encDecimal:
		return append(dst, v.(mapping.Decimal)...)
	case encBoolUInt8:
		if v.(bool) {
			return append(dst, '1')
		}
		return append(dst, '0')
	case encBool:
		return strconv.AppendBool(dst, v.(bool))
	case encDateTime:
		return strconv.AppendInt(dst, v.(time.Time).Unix(), 10)
	case encDateTime64:
		ns := v.(time.Time).UnixNano()
		div := int64(1)
		for range 9 - e.scale {
			div *= 10
		}
		q := ns / div
		if ns%div != 0 && ns < 0 {
			q-- // floor, toward the past
		}
		return strconv.AppendInt(dst, q, 10)
	case encDate, encDate32:
		dst = append(dst, '"')
		dst = append(dst, v.(mapping.CivilDate).String()...)
		return append(dst, '"')
	case encBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.([]byte))
		return append(dst, '"')
	}
	// Unreachable for a column that passed the start-up check; write
	// something the server refuses rather than a wrong value.
	return append(dst, `{"unencodable":true}`...)
}
