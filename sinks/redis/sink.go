package redissink

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/nats-sinks/nats-sink/internal/broker"
	"github.com/nats-sinks/nats-sink/sink"
)

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.HealthChecker = (*Sink)(nil)
)

// addScript adds one entry unless the message's dedupe key names an entry
// added earlier. A MULTI/EXEC transaction cannot make XADD depend on the
// outcome of SET NX, and WATCH costs a round trip and retries under
// contention; a script is atomic, conditional, and pipelines like any
// command.
//
// KEYS: stream key, dedupe key. ARGV: window ms, maxlen or "", exact 0/1,
// then the entry's field/value pairs. Reply {1, id} for a new entry,
// {0, id} for a duplicate.
//
// With ARGV[1] "probe" it writes nothing: the health check runs it to prove
// that the user may still run the script, and, given a stream key as the
// only key, that XADD on that key is allowed (Redis 7's
// redis.acl_check_cmd) and that the key is not of another type. Reply
// {2, ""}.
const addScript = `if ARGV[1] == 'probe' then
  if KEYS[1] then
    if redis.acl_check_cmd and not redis.acl_check_cmd('XADD', KEYS[1], '*', 'f', 'v') then
      return redis.error_reply('NOPERM the user may not run XADD on ' .. KEYS[1])
    end
    if not redis.acl_check_cmd or redis.acl_check_cmd('TYPE', KEYS[1]) then
      local t = redis.call('TYPE', KEYS[1])['ok']
      if t ~= 'none' and t ~= 'stream' then
        return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. t .. ', not a stream')
      end
    end
  end
  return {2, ''}
end
local window = tonumber(ARGV[1])
if window > 0 then
  local id = redis.call('GET', KEYS[2])
  if id then return {0, id} end
end
local id
if ARGV[2] == '' then
  id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 4))
elseif ARGV[3] == '1' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '=', ARGV[2], '*', unpack(ARGV, 4))
else
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 4))
end
if window > 0 then redis.call('SET', KEYS[2], id, 'PX', window, 'NX') end
return {1, id}
`

// Sink adds one stream entry per message. It is safe for concurrent
// WriteBatch calls: each runs its pipeline on its own pooled connection.
type Sink struct {
	cfg       Config
	client    *redis.Client
	streamKey broker.Template
	sha       string
	log       *slog.Logger
	tracer    sink.Tracer
	now       func() time.Time

	pipelineSeconds sink.Histogram
	duplicates      sink.Counter
	waitShortfall   sink.Counter

	aofWarned sync.Once
	stopOnce  sync.Once
}

// New checks c, reads the password and TLS files, connects, loads the add
// script and warns when the server has AOF disabled. Invalid values and
// unreadable secrets are configuration errors (exit 2), and so is a
// database the server refuses to SELECT; an unreachable server or refused
// credentials are plain errors (exit 1).
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	routeDriverLog(deps.Log())
	tmpl, _ := broker.ParseTemplate(c.StreamKey, broker.Raw) // Validate parsed it
	pw, _, err := broker.ResolvePassword(&c.Auth, deps.LookupEnv)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(c.Address)
	opts := &redis.Options{
		Addr:     c.Address,
		DB:       c.DB,
		Username: c.Auth.User(),
		Password: pw,
		// RESP2 needs nothing but AUTH and SELECT, which every ACL user
		// may run; HELLO and CLIENT SETINFO could be denied to a user
		// restricted to the sink's commands.
		Protocol:        2,
		DisableIdentity: true,
		// The client's own retries would run a pipeline again after an
		// unknown outcome; the runner redelivers instead, and the dedupe
		// keys absorb that.
		MaxRetries:       -1,
		DialTimeout:      time.Duration(c.DialTimeoutMS) * time.Millisecond,
		ReadTimeout:      c.PublishTimeout(),
		WriteTimeout:     c.PublishTimeout(),
		PoolSize:         c.PoolSize,
		PipelinePoolSize: -1,
		// Every write has a deadline (publish_timeout_ms, plus
		// wait_timeout_ms with WAIT); the socket honours it.
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if c.TLS.Enabled {
		if opts.TLSConfig, err = broker.TLSConfig(&c.TLS, host); err != nil {
			return nil, err
		}
	}
	s := &Sink{
		cfg:       c,
		client:    redis.NewClient(opts),
		streamKey: tmpl,
		sha:       scriptSHA(),
		log:       deps.Log(),
		tracer:    deps.Tracing(),
		now:       time.Now,
	}
	m := deps.Meter()
	// A second sink on the same host (test-sink, then run) gets the
	// instruments already registered; an error means a name clash, and the
	// sink runs without that metric rather than failing to start.
	if s.pipelineSeconds, err = m.Histogram("redis_pipeline_seconds", "Round trip of one batch's pipeline to Redis.", nil); err != nil {
		s.pipelineSeconds = nopInstrument{}
	}
	if s.duplicates, err = m.Counter("redis_duplicates_total", "Messages Redis already held under their dedupe key (no second entry)."); err != nil {
		s.duplicates = nopInstrument{}
	}
	if s.waitShortfall, err = m.Counter("redis_wait_shortfall_total", "Batches whose WAIT counted fewer replicas than wait_replicas."); err != nil {
		s.waitShortfall = nopInstrument{}
	}

	sctx, cancel := context.WithTimeout(ctx, opts.DialTimeout+c.PublishTimeout())
	defer cancel()
	if err := s.start(sctx); err != nil {
		s.client.Close()
		return nil, err
	}
	return s, nil
}

// scriptSHA is the SHA-1 of addScript in hex, the name EVALSHA runs it by.
func scriptSHA() string {
	sum := sha1.Sum([]byte(addScript))
	return hex.EncodeToString(sum[:])
}

type nopInstrument struct{}

func (nopInstrument) Add(int)         {}
func (nopInstrument) Observe(float64) {}

// start is Start's I/O: PING (connect, AUTH, SELECT), SCRIPT LOAD and the
// persistence warning.
func (s *Sink) start(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		if isSelectRefused(err) {
			return fmt.Errorf("redis sink: db %d: %w: %w", s.cfg.DB, err, sink.ErrConfig)
		}
		return fmt.Errorf("redis sink: connect to %s: %w", s.cfg.Address, classify(err))
	}
	if err := s.load(ctx); err != nil {
		return err
	}
	s.checkPersistence(ctx)
	return nil
}

// isSelectRefused reports the server's refusal of the configured database.
func isSelectRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "DB index is out of range") || strings.Contains(msg, "SELECT is not allowed")
}

// load loads the add script. Its SHA-1 is that of its text, known before
// (s.sha): concurrent reloads change nothing another batch reads.
func (s *Sink) load(ctx context.Context) error {
	sha, err := s.client.ScriptLoad(ctx, addScript).Result()
	if err != nil {
		return fmt.Errorf("redis sink: SCRIPT LOAD on %s: %w", s.cfg.Address, classify(err))
	}
	if sha != s.sha {
		return fmt.Errorf("redis sink: SCRIPT LOAD on %s returned SHA-1 %s, want %s", s.cfg.Address, sha, s.sha)
	}
	return nil
}

// checkPersistence logs, once per sink, that committed entries live only
// in memory when the server has AOF disabled. An INFO the user may not run
// is no reason to fail.
func (s *Sink) checkPersistence(ctx context.Context) {
	info, err := s.client.Info(ctx, "persistence").Result()
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(info, "\n") {
		if strings.TrimSpace(line) == "aof_enabled:0" {
			s.aofWarned.Do(func() {
				s.log.Warn("redis server has AOF disabled; committed entries do not survive a server restart")
			})
		}
	}
}

// Type returns "redis".
func (s *Sink) Type() string { return "redis" }

// entry is one message's pending add.
type entry struct {
	i        int
	key      string // stream key
	args     []any  // EVALSHA arguments after the keys
	dedupe   string
	span     sink.Span
	cmd      *redis.Cmd
	attempts int
}

// WriteBatch adds every message of batch in one pipeline on one
// connection: per message an EVALSHA of the add script, then WAIT when
// wait_replicas is set. Each message gets its own result from its reply;
// a message whose reply did not arrive (connection lost, timeout) is
// Temporary, since Redis may or may not have applied it, and its
// redelivery meets the dedupe key.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	results := make([]sink.Result, len(batch))
	if err := ctx.Err(); err != nil {
		for i, e := range batch {
			results[i] = sink.Failed(errorf(e, "", err))
		}
		return results
	}
	storedAt := s.now()
	entries := make([]*entry, 0, len(batch))
	for i, e := range batch {
		en, err := s.prepare(ctx, i, e, storedAt)
		if err != nil {
			results[i] = sink.Failed(err)
			if en != nil {
				broker.EndSpan(en.span, results[i])
			}
			continue
		}
		entries = append(entries, en)
	}
	if len(entries) == 0 {
		return results
	}
	timeout := s.cfg.PublishTimeout()
	if s.cfg.WaitReplicas > 0 {
		timeout += time.Duration(s.cfg.WaitTimeoutMS) * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	pending := entries
	for len(pending) > 0 {
		replicas, waitErr := s.exec(wctx, pending)
		var retry []*entry
		for _, en := range pending {
			err := en.cmd.Err()
			if isNoScript(err) && en.attempts == 1 {
				// The server lost the script (restarted or flushed):
				// load it again and retry this message once.
				retry = append(retry, en)
				continue
			}
			results[en.i] = s.result(batch[en.i], en, err)
			if s.cfg.WaitReplicas > 0 && results[en.i].Outcome.Acked() {
				if werr := s.waitError(replicas, waitErr); werr != nil {
					results[en.i] = sink.Failed(errorf(batch[en.i], en.key, werr))
				}
			}
			broker.EndSpan(en.span, results[en.i])
		}
		if s.cfg.WaitReplicas > 0 && waitErr == nil && replicas < s.cfg.WaitReplicas {
			s.waitShortfall.Add(1)
		}
		if len(retry) > 0 {
			if err := s.load(wctx); err != nil {
				for _, en := range retry {
					results[en.i] = sink.Failed(errorf(batch[en.i], en.key, err))
					broker.EndSpan(en.span, results[en.i])
				}
				retry = nil
			}
		}
		pending = retry
	}
	return results
}

// prepare builds the record of e, renders its stream key and starts its
// span. A returned entry with an error carries the span to end.
func (s *Sink) prepare(ctx context.Context, i int, e *sink.Envelope, storedAt time.Time) (*entry, error) {
	r, err := broker.Build(&s.cfg.Options, "redis", e, storedAt)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	key, err := s.streamKey.Render(e)
	if err != nil {
		return nil, errorf(e, "", err)
	}
	if len(key) == 0 || len(key) > 1024 {
		return nil, errorf(e, "", sink.AsPermanentType(sink.ValidationError,
			fmt.Errorf("stream key of %d bytes is outside 1 to 1024", len(key))))
	}
	en := &entry{i: i, key: key, dedupe: s.cfg.DedupeKeyPrefix + key + ":" + r.Key}
	en.span = broker.Trace(ctx, s.tracer, e, r, "redis", key)
	// The forwarded headers travel as one JSON field, so the record's size
	// counts that field rather than the pairs.
	headers := r.HeadersJSON()
	size := r.Size() - sizeOfPairs(r.Headers)
	if headers != nil {
		size += len("headers") + len(headers)
	}
	if err := broker.CheckSize("redis", size, s.cfg.MaxRecordBytes); err != nil {
		return en, errorf(e, key, err)
	}
	maxlen, exact := "", "0"
	if s.cfg.MaxLen != nil {
		maxlen = strconv.FormatInt(*s.cfg.MaxLen, 10)
	}
	if s.cfg.MaxLenExact {
		exact = "1"
	}
	args := make([]any, 0, 5+2*len(r.Meta)+2)
	args = append(args, strconv.FormatInt(s.cfg.DedupeWindowMS, 10), maxlen, exact, "data", r.Body)
	for _, p := range r.Meta {
		args = append(args, p.Name, p.Value)
	}
	if headers != nil {
		args = append(args, "headers", headers)
	}
	en.args = args
	return en, nil
}

func sizeOfPairs(ps []broker.Pair) int {
	n := 0
	for _, p := range ps {
		n += len(p.Name) + len(p.Value)
	}
	return n
}

// exec runs one pipeline of the entries' adds, then WAIT when configured,
// and returns WAIT's reply.
func (s *Sink) exec(ctx context.Context, entries []*entry) (int, error) {
	pipe := s.client.Pipeline()
	for _, en := range entries {
		en.attempts++
		en.cmd = pipe.EvalSha(ctx, s.sha, []string{en.key, en.dedupe}, en.args...)
	}
	var wait *redis.IntCmd
	if s.cfg.WaitReplicas > 0 {
		wait = redis.NewIntCmd(ctx, "wait", s.cfg.WaitReplicas, s.cfg.WaitTimeoutMS)
		_ = pipe.Process(ctx, wait)
	}
	start := time.Now()
	_, _ = pipe.Exec(ctx) // each command carries its own error
	s.pipelineSeconds.Observe(time.Since(start).Seconds())
	if wait == nil {
		return 0, nil
	}
	n, err := wait.Result()
	return int(n), err
}

// result classifies one add's reply.
func (s *Sink) result(e *sink.Envelope, en *entry, err error) sink.Result {
	if err != nil {
		return sink.Failed(errorf(e, en.key, classify(err)))
	}
	reply, ok := en.cmd.Val().([]any)
	if !ok || len(reply) != 2 {
		return sink.Failed(errorf(e, en.key, fmt.Errorf("unexpected script reply %T", en.cmd.Val())))
	}
	if added, _ := reply[0].(int64); added == 1 {
		return sink.Ok
	}
	s.duplicates.Add(1)
	return sink.Result{Outcome: sink.Duplicate}
}

// waitError is the error of a batch whose writes WAIT did not see reach
// wait_replicas replicas: every committed or duplicate message of the batch
// becomes Temporary, and its redelivery meets the dedupe key, so it adds no
// second entry.
func (s *Sink) waitError(replicas int, err error) error {
	if err != nil {
		return fmt.Errorf("WAIT %d: %w", s.cfg.WaitReplicas, classify(err))
	}
	if replicas < s.cfg.WaitReplicas {
		return fmt.Errorf("WAIT counted %d of %d replicas within wait_timeout_ms (%d)", replicas, s.cfg.WaitReplicas, s.cfg.WaitTimeoutMS)
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// destinationPrefixes are the error codes that fail every message alike
// until an operator acts: credentials, ACL permissions, scripting disabled,
// a full server that may not evict, and a stream key holding another type.
var destinationPrefixes = [...]string{"NOAUTH", "WRONGPASS", "NOPERM", "OOM", "WRONGTYPE", "ERR unknown command"}

// classify marks an error of the Redis client per the sink's error table:
// the destinationPrefixes and TLS certificate failures are Destination;
// READONLY, LOADING, BUSY, MASTERDOWN, TRYAGAIN, other script errors,
// connection errors and timeouts are Temporary.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range destinationPrefixes {
			if strings.HasPrefix(msg, p) {
				return sink.AsDestination(err)
			}
		}
		// Redis 6.2 and 7.0 report a command the script's ACL user may not
		// run, and AUTH refusals, as plain ERR.
		if strings.HasPrefix(msg, "ERR") && (strings.Contains(msg, "can't run this command") ||
			strings.Contains(msg, "has no permissions") || strings.Contains(msg, "AUTH") ||
			strings.Contains(msg, "invalid password") || strings.Contains(msg, "no password is set")) {
			return sink.AsDestination(err)
		}
		return err
	}
	if broker.CertificateError(err) {
		return sink.AsDestination(err)
	}
	return err
}

// errorf wraps err with the message's origin; the text names the subject,
// stream sequence and stream key only, never payload or header values.
func errorf(e *sink.Envelope, key string, err error) error {
	if key == "" {
		return fmt.Errorf("redis sink (subject %s, stream seq %d): %w", e.Subject, e.StreamSequence, err)
	}
	return fmt.Errorf("redis sink: add to stream %s (subject %s, stream seq %d): %w", key, e.Subject, e.StreamSequence, err)
}

// Healthcheck sends PING, checks that the server still has the add script
// (loading it when it does not), runs the script's probe, and repeats the
// persistence warning check. Refused credentials or permissions are
// Destination errors; an unreachable server is a plain (temporary) one.
//
// The probe proves that the user may run the script, and for a stream_key
// without placeholders that XADD on it is allowed and that it holds no
// other type. A templated key is not checked: the key of some future
// message is unknown, and a check of the wrong key could fail while writes
// succeed, holding the runner's circuit open for nothing.
func (s *Sink) Healthcheck(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis sink: PING %s: %w", s.cfg.Address, classify(err))
	}
	exists, err := s.client.ScriptExists(ctx, s.sha).Result()
	if err != nil {
		return fmt.Errorf("redis sink: SCRIPT EXISTS on %s: %w", s.cfg.Address, classify(err))
	}
	if len(exists) != 1 || !exists[0] {
		if err := s.load(ctx); err != nil {
			return err
		}
	}
	// No key at all for a templated stream_key: the server checks the
	// user's key patterns on EVALSHA's keys, and a made-up key could be
	// refused where every real one is allowed.
	var keys []string
	if key, ok := s.streamKey.Literal(); ok {
		keys = []string{key}
	}
	if err := s.client.EvalSha(ctx, s.sha, keys, "probe").Err(); err != nil {
		return fmt.Errorf("redis sink: probe on %s: %w", s.cfg.Address, classify(err))
	}
	s.checkPersistence(ctx)
	return nil
}

// Stop closes the connections. The runner calls it once, after the last
// WriteBatch returned; later calls do nothing.
func (s *Sink) Stop(context.Context) error {
	s.stopOnce.Do(func() { s.client.Close() })
	return nil
}
