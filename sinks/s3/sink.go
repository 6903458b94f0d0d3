package s3sink

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	retrydelay "github.com/nats-sinks/nats-sink/internal/backoff"
	"github.com/nats-sinks/nats-sink/internal/fanout"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/s3conn"
	"github.com/nats-sinks/nats-sink/sink"
)

var _ sink.Sink = (*Sink)(nil)

// The Sink deliberately has no Healthcheck: test-sink makes no request
// (docs/s3.md). After a Destination outcome the runner probes by retrying
// the next batch instead (docs/delivery.md#destination-circuit), which exercises the real PUT path
// and its permissions rather than a HEAD on the bucket that needs others.

// Sink writes one object (and optionally one sidecar) per message. It is
// safe for concurrent WriteBatch calls; they share one client and one
// connection pool.
type Sink struct {
	cfg    Config
	client *s3.Client
	// directoryBucket is set for S3 Express One Zone bucket names
	// (suffix "--x-s3"), which refuse Content-MD5.
	directoryBucket bool
	timeout         time.Duration
	log             *slog.Logger

	// headMode is set once the store answered a conditional PUT with 501
	// (or existence_check is "head"): from then on existence is checked
	// with HEAD before an unconditional PUT.
	headMode atomic.Bool
	warnOnce sync.Once

	putSeconds sink.Histogram
	duplicates sink.Counter

	// sleep waits d or until ctx is done; tests replace it to record the
	// backoff delays without waiting.
	sleep func(ctx context.Context, d time.Duration) error
	// jitter draws u in [0, 1) for the retry delay.
	jitter func() float64
	now    func() time.Time
}

// New validates c (Config.Validate), reads the credentials' environment
// variables (through deps) or profile and creates the S3 client. It makes
// no request: whether the bucket exists and the credentials work shows with
// the first PUT (docs/s3.md). Missing variables and profiles are
// configuration errors (*sink.ConfigError naming the key, or wrapping
// sink.ErrConfig; exit 2 in the CLI). The one warning the sink logs (the
// switch to HEAD-then-PUT) goes to deps' logger.
func New(ctx context.Context, c Config, deps sink.Deps) (*Sink, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	client, err := s3conn.NewClient(ctx, c.settings(), deps)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		cfg:             c,
		client:          client,
		directoryBucket: strings.HasSuffix(c.Bucket, "--x-s3"),
		timeout:         time.Duration(c.RequestTimeoutSeconds * float64(time.Second)),
		log:             deps.Log(),
		sleep:           retrydelay.Sleep,
		jitter:          retrydelay.Draw,
		now:             time.Now,
	}
	s.headMode.Store(c.ExistenceCheck == "head")
	m := deps.Meter()
	s.putSeconds, _ = m.Histogram("s3_put_seconds", "Duration of one S3 request attempt (PUT; HEAD in head mode and to check an existing object; GET to read one without identity metadata).", nil)
	s.duplicates, _ = m.Counter("s3_duplicates_total", "Messages whose S3 object already existed (reported Duplicate).")
	return s, nil
}

// markCredentials marks credential failures so that classify can tell them
// from network errors (as s3conn.MarkCredentials, which New's client uses).
type markCredentials struct{ aws.CredentialsProvider }

func (m markCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.CredentialsProvider.Retrieve(ctx)
	return c, s3conn.CredentialsFailure(err)
}

// Type returns "s3".
func (s *Sink) Type() string { return "s3" }

// Stop releases nothing: requests are bound to their WriteBatch context,
// the runner calls Stop after the last WriteBatch returned, and the SDK's
// pooled connections close at their idle timeout.
func (s *Sink) Stop(context.Context) error { return nil }

// WriteBatch writes one object (and sidecar) per envelope and returns one
// result per envelope (docs/library.md#the-sink-boundary, docs/s3.md).
//
// With concurrency 1 the messages go in order, and after a Temporary or
// Destination result the rest are NotAttempted. With concurrency > 1 up to
// that many messages are written at once and each keeps its own result;
// after a Destination result, messages not yet started are NotAttempted.
func (s *Sink) WriteBatch(ctx context.Context, batch []*sink.Envelope) []sink.Result {
	return fanout.Write(ctx, "s3 sink", batch, s.cfg.Concurrency, s.write)
}

// errKeyExists is the spec's text for fail_existing.
var errKeyExists = errors.New("S3 object key already exists")

// write stores one message and returns its result.
func (s *Sink) write(ctx context.Context, e *sink.Envelope) sink.Result {
	if err := ctx.Err(); err != nil {
		return sink.Failed(fmt.Errorf("s3 sink (stream seq %d): %w", e.StreamSequence, err))
	}
	p, err := s.cfg.prepare(e, s.now())
	if err != nil {
		return sink.Failed(fmt.Errorf("s3 sink (stream seq %d): %w", e.StreamSequence, err))
	}
	existed, err := s.store(ctx, p.primary)
	if err != nil {
		return sink.Failed(fmt.Errorf("s3 object %s (stream seq %d): %w", p.primary.key, e.StreamSequence, err))
	}
	if existed && s.cfg.DuplicatePolicy == "fail_existing" {
		return sink.Failed(sink.AsPermanent(fmt.Errorf("%w: %s", errKeyExists, p.primary.key)))
	}
	if existed {
		// skip_existing: the object is this message's earlier write only
		// if it says so. Another message's object under the same key
		// (written before keys were made distinct, or a hash collision)
		// must not swallow this message as a duplicate.
		if err := s.checkSame(ctx, p); err != nil {
			return sink.Failed(fmt.Errorf("s3 object %s (stream seq %d): %w", p.primary.key, e.StreamSequence, err))
		}
	}
	if p.sidecar != nil {
		// Also after an existing object: a crash between the two PUTs
		// left the object without its sidecar, and this heals it.
		if _, err := s.store(ctx, *p.sidecar); err != nil {
			return sink.Failed(fmt.Errorf("s3 sidecar %s (stream seq %d): %w", p.sidecar.key, e.StreamSequence, err))
		}
	}
	if existed {
		s.duplicates.Add(1)
		return sink.Result{Outcome: sink.Duplicate}
	}
	return sink.Ok
}

// store writes o under the duplicate policy and reports whether the key
// already existed (then nothing was written). Errors are classified for
// sink.Failed.
func (s *Sink) store(ctx context.Context, o object) (existed bool, err error) {
	if s.cfg.DuplicatePolicy == "replace" {
		return false, s.retry(ctx, func(actx context.Context) error { return s.put(actx, o, false) })
	}
	if !s.headMode.Load() {
		err := s.retry(ctx, func(actx context.Context) error { return s.put(actx, o, true) })
		switch {
		case err == nil:
			return false, nil
		case isExists(err):
			return true, nil
		case !isNotImplemented(err):
			return false, err
		}
		s.switchToHead(err)
	}
	err = s.retry(ctx, func(actx context.Context) error {
		var herr error
		existed, herr = s.head(actx, o.key)
		return herr
	})
	if err != nil || existed {
		return existed, err
	}
	return false, s.retry(ctx, func(actx context.Context) error { return s.put(actx, o, false) })
}

// switchToHead turns on HEAD-then-PUT for the rest of the process after the
// store refused a conditional PUT as not implemented.
func (s *Sink) switchToHead(cause error) {
	s.headMode.Store(true)
	s.warnOnce.Do(func() {
		s.log.Warn("S3 store does not implement conditional PUT (If-None-Match); using HEAD then PUT from now on, which is safe only while one writer handles each key",
			"bucket", s.cfg.Bucket, "error", cause.Error())
	})
}

// retry runs op with a per-attempt timeout and retries temporary failures
// per the retry keys. It returns nil, the unclassified answers that store
// interprets (exists, not implemented), or the classified error of the last
// attempt.
func (s *Sink) retry(ctx context.Context, op func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.timeout)
		err := op(actx)
		cancel()
		if err == nil || isExists(err) || isNotImplemented(err) {
			return err
		}
		err = classify(ctx, err)
		if sink.Failed(err).Outcome != sink.Temporary || attempt > s.cfg.MaxRetries || ctx.Err() != nil {
			return err
		}
		if serr := s.sleep(ctx, backoff(attempt, &s.cfg, s.jitter())); serr != nil {
			return err
		}
	}
}

// put makes one PutObject attempt; conditional adds If-None-Match: *.
func (s *Sink) put(ctx context.Context, o object, conditional bool) error {
	in := s.putInput(o, conditional)
	start := time.Now()
	_, err := s.client.PutObject(ctx, in)
	s.putSeconds.Observe(time.Since(start).Seconds())
	return err
}

// putInput returns the PutObject request for o.
func (s *Sink) putInput(o object, conditional bool) *s3.PutObjectInput {
	in := &s3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           aws.String(o.key),
		Body:          bytes.NewReader(o.body),
		ContentLength: aws.Int64(int64(len(o.body))),
		ContentType:   aws.String(s.cfg.ContentType),
		Metadata:      o.metadata,
	}
	if s.directoryBucket {
		// Directory buckets (S3 Express One Zone) refuse Content-MD5;
		// they get the SDK's CRC32 instead, as before.
		in.ChecksumAlgorithm = types.ChecksumAlgorithmCrc32
	} else {
		in.ContentMD5 = aws.String(contentMD5(o.body))
	}
	if o.gzip {
		in.ContentEncoding = aws.String("gzip")
	}
	if conditional {
		in.IfNoneMatch = aws.String("*")
	}
	if s.cfg.ServerSideEncryption == "AES256" {
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	}
	return in
}

func contentMD5(body []byte) string { return s3conn.ContentMD5(body) }

// head reports whether key exists. A 404 is "no"; anything else that is not
// a 200 is an error.
func (s *Sink) head(ctx context.Context, key string) (bool, error) {
	_, ok, err := s.headMeta(ctx, key)
	return ok, err
}

// headMeta is head that also returns the object's user metadata, with
// lower-cased names.
func (s *Sink) headMeta(ctx context.Context, key string) (map[string]string, bool, error) {
	start := time.Now()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(key)})
	s.putSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		meta := make(map[string]string, len(out.Metadata))
		for k, v := range out.Metadata {
			meta[strings.ToLower(k)] = v
		}
		return meta, true, nil
	}
	if status, _ := response(err); status == http.StatusNotFound {
		return nil, false, nil
	}
	return nil, false, err
}

// errOtherMessage reports an object at a message's key that belongs to
// another message.
var errOtherMessage = errors.New("S3 object key exists and holds another message's object")

// errGone reports an object that vanished between the store's "exists"
// and the read of its identity.
var errGone = errors.New("S3 object disappeared after the store reported it exists")

// maxCompareBytes bounds the body read to compare an existing object:
// max_object_bytes plus room for a store's framing.
func (s *Sink) maxCompareBytes() int64 { return int64(s.cfg.MaxObjectBytes) + 1<<16 }

// checkSame returns nil when the existing object at p's key is this
// message's, a Permanent errOtherMessage when it is another's, and a
// classified error when that cannot be found out now. The object's
// identity comes from its metadata (metaIdentityHash); an object without
// it (metadata_mode none, or written by an earlier version or nats-sinks)
// is read: an envelope body names its message, and a payload body is
// this message's when it holds the same bytes (then nothing of this
// message is missing from the store).
func (s *Sink) checkSame(ctx context.Context, p prepared) error {
	var meta map[string]string
	var found bool
	err := s.retry(ctx, func(actx context.Context) error {
		var herr error
		meta, found, herr = s.headMeta(actx, p.primary.key)
		return herr
	})
	switch {
	case err != nil:
		return err
	case !found:
		return errGone // Temporary: the redelivery writes it again
	}
	if h, ok := meta[metaIdentityHash]; ok {
		if h != sha256Hex(p.identity) {
			return sink.AsPermanent(errOtherMessage)
		}
		return nil
	}
	var body []byte
	err = s.retry(ctx, func(actx context.Context) error {
		var gerr error
		body, found, gerr = s.get(actx, p.primary.key)
		return gerr
	})
	switch {
	case err != nil:
		return err
	case !found:
		return errGone
	}
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, zerr := gzip.NewReader(bytes.NewReader(body))
		if zerr == nil {
			body, zerr = io.ReadAll(io.LimitReader(zr, s.maxCompareBytes()))
		}
		if zerr != nil {
			return sink.AsPermanent(errOtherMessage) // not an object of ours
		}
	}
	if s.cfg.ObjectFormat == "payload" {
		if !bytes.Equal(body, p.primary.plain) {
			return sink.AsPermanent(errOtherMessage)
		}
		return nil
	}
	st, ok := record.ParseStored(body)
	if !ok {
		return sink.AsPermanent(errOtherMessage)
	}
	if id, ok := st.Identity(s.cfg.KeyStrategy); !ok || id != record.StoredForm(p.identity) {
		return sink.AsPermanent(errOtherMessage)
	}
	return nil
}

// get reads an object's body (at most maxCompareBytes); found is false
// for a 404.
func (s *Sink) get(ctx context.Context, key string) (body []byte, found bool, err error) {
	start := time.Now()
	defer func() { s.putSeconds.Observe(time.Since(start).Seconds()) }()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: aws.String(key)})
	if err != nil {
		if status, code := response(err); status == http.StatusNotFound || code == "NoSuchKey" {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer out.Body.Close()
	body, err = io.ReadAll(io.LimitReader(out.Body, s.maxCompareBytes()))
	return body, err == nil, err
}

// response returns the HTTP status and S3 error code of err; status 0 means
// no response was received.
func response(err error) (status int, code string) { return s3conn.Response(err) }

// isExists reports whether err is the answer to a conditional PUT whose key
// exists (s3conn.IsExists).
func isExists(err error) bool { return s3conn.IsExists(err) }

// isNotImplemented reports whether the store refused a request as not
// implemented (the signal to fall back to HEAD-then-PUT).
func isNotImplemented(err error) bool { return s3conn.IsNotImplemented(err) }

// classify marks err with its outcome class (docs/s3.md, s3conn.Classify).
func classify(ctx context.Context, err error) error { return s3conn.Classify(ctx, err) }

// backoff returns the delay before retry attempt a (a ≥ 1): the formula of
// docs/delivery.md#retries-and-back-off over the retry_* keys — raw delay of the mode, capped at
// retry_max_backoff_ms, then jittered with u in [0, 1).
func backoff(a int, c *Config, u float64) time.Duration {
	return retrydelay.Policy{Base: time.Duration(c.RetryBackoffMS) * time.Millisecond, Max: time.Duration(c.RetryMaxBackoffMS) * time.Millisecond,
		Mode: c.RetryBackoffMode, Multiplier: c.RetryBackoffMultiplier, Jitter: c.RetryJitter}.Delay(a, u)
}
