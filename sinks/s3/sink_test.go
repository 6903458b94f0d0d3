package s3sink

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
	"github.com/nats-sinks/nats-sink/telemetry"
)

// TestGoldenObjects writes the message of docs/formats.md#file-records with a sidecar
// and compares both bodies and their user metadata with the golden files.
// The metadata document inside is the spec's own golden example (docs/http.md)
// plus "custody": null in the object and without it in the sidecar.
func TestGoldenObjects(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.Prefix = ptr("nats/orders")
	c.MetadataMode = "sidecar"
	c.ObjectMetadata = map[string]string{"team": "billing"}
	s, _ := open(t, c)
	if diff := cmp.Diff([]res{{Outcome: sink.Committed}}, summarize(s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()}))); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	objKey := "nats/orders/idempotency-key/stream-sequence_ORDERS_42.json"
	sideKey := "nats/orders/idempotency-key/stream-sequence_ORDERS_42.metadata.json"
	if diff := cmp.Diff([]string{objKey, sideKey}, st.keys(t)); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		key, golden string
		meta        map[string]string
	}{
		{objKey, "testdata/object_golden.json", map[string]string{
			"nats-sinks-schema": ObjectSchema, "nats-sinks-schema-version": "1", "nats-sinks-key-strategy": "idempotency_key",
			"team":                         "billing",
			"nats-sinks-message-id-sha256": "6b2d27e6813f395f2e78d1db48d492907b8c0c7e379aabd0124bc8b73eeef3ff", // sha256("O-1001")
			// sha256("stream-sequence:ORDERS:42"), the object's identity
			"nats-sinks-idempotency-key-sha256": "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b",
		}},
		{sideKey, "testdata/sidecar_golden.json", map[string]string{
			"nats-sinks-schema": SidecarSchema, "nats-sinks-schema-version": "1", "nats-sinks-key-strategy": "idempotency_key",
			"team": "billing",
		}},
	} {
		want, err := os.ReadFile(tt.golden)
		if err != nil {
			t.Fatal(err)
		}
		body, hdr := st.object(t, tt.key)
		if !bytes.Equal(body, want) {
			t.Errorf("%s body differs from %s\n got: %s\nwant: %s", tt.key, tt.golden, body, want)
		}
		if diff := cmp.Diff(tt.meta, userMeta(hdr)); diff != "" {
			t.Errorf("%s user metadata (-want +got):\n%s", tt.key, diff)
		}
		if hdr["Content-Type"] != "application/json" || hdr["Content-Encoding"] != "" {
			t.Errorf("%s Content-Type %q, Content-Encoding %q; want application/json and none", tt.key, hdr["Content-Type"], hdr["Content-Encoding"])
		}
	}
}

func TestPayloadObjectAndNoMetadata(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.ObjectFormat, c.MetadataMode, c.KeyStrategy = "payload", "none", "message_id"
	s, _ := open(t, c)
	s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})
	body, hdr := st.object(t, "message-id/O-1001.json")
	if want := `{"amount":42.5,"note":"café","order_id":"O-1001"}`; string(body) != want {
		t.Errorf("payload object = %s, want %s", body, want)
	}
	if m := userMeta(hdr); len(m) != 0 {
		t.Errorf("metadata_mode none stored user metadata %v", m)
	}
}

func TestGzip(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.Compression, c.ObjectSuffix, c.MetadataMode = "gzip", ".json.gz", "sidecar"
	s, _ := open(t, c)
	s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})

	body, hdr := st.object(t, "idempotency-key/stream-sequence_ORDERS_42.json.gz")
	if hdr["Content-Encoding"] != "gzip" || hdr["Content-Type"] != "application/json" {
		t.Errorf("Content-Encoding %q, Content-Type %q; want gzip, application/json", hdr["Content-Encoding"], hdr["Content-Type"])
	}
	// Header: magic, CM 8, no flags (no name), MTIME 0, XFL, OS 3.
	if len(body) < 10 || !bytes.Equal(body[:8], []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0}) || body[9] != 3 {
		t.Errorf("gzip header % x, want 1f 8b 08 00 00000000 xx 03", body[:min(10, len(body))])
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/object_golden.json")
	if !bytes.Equal(plain, want) {
		t.Errorf("decompressed object differs from the golden object:\n got: %s", plain)
	}
	// The sidecar key replaces the whole object suffix; sidecars are never
	// compressed.
	side, shdr := st.object(t, "idempotency-key/stream-sequence_ORDERS_42.metadata.json")
	if shdr["Content-Encoding"] != "" || !bytes.HasPrefix(side, []byte(`{"classification"`)) {
		t.Errorf("sidecar Content-Encoding %q, body %.20s; want plain JSON", shdr["Content-Encoding"], side)
	}
}

func TestSizeLimits(t *testing.T) {
	st := newStore(t)
	big := shapestest.Envelope("S", 1)
	big.Data = bytes.Repeat([]byte("a"), 5000) // text, compresses well

	c := st.config()
	c.MaxObjectBytes = 4000
	c.Compression, c.ObjectSuffix = "gzip", ".json.gz"
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{big, shapestest.Envelope("S", 2)})
	// Checked before compression too: the 5 kB body is refused although
	// its gzip would fit; the next message is unaffected.
	if diff := cmp.Diff([]res{{sink.Permanent, sink.SerializationError}, {Outcome: sink.Committed}}, summarize(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if !strings.Contains(rs[0].Err.Error(), "max_object_bytes") {
		t.Errorf("error %q does not name max_object_bytes", rs[0].Err)
	}

	c = st.config()
	c.Prefix = ptr(strings.Repeat("p", 100))
	c.MaxKeyBytes = 64
	s, _ = open(t, c)
	rs = s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("S", 3)})
	if rs[0].Outcome != sink.Permanent || rs[0].ErrorType != sink.SerializationError || !strings.Contains(rs[0].Err.Error(), "max_key_bytes") {
		t.Errorf("long key = %+v, want Permanent SerializationError naming max_key_bytes", rs[0])
	}
}

// TestDuplicatePolicies writes one message twice under each policy, with
// the clock moved between the writes, and checks results, the object left
// in the store and the duplicates metric.
func TestDuplicatePolicies(t *testing.T) {
	first := []byte(`"stored_at_epoch_ns":1780048800300000000`)
	second := []byte(`"stored_at_epoch_ns":1780048801300000000`)
	for _, tt := range []struct {
		policy     string
		want       []res
		wantStored []byte
		wantDups   uint64
	}{
		{"skip_existing", []res{{Outcome: sink.Committed}, {Outcome: sink.Duplicate}}, first, 1},
		{"replace", []res{{Outcome: sink.Committed}, {Outcome: sink.Committed}}, second, 0},
		{"fail_existing", []res{{Outcome: sink.Committed}, {sink.Permanent, sink.PermanentSinkError}}, first, 0},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			st := newStore(t)
			m, err := telemetry.NewMetrics(nil, "nats_sinks")
			if err != nil {
				t.Fatal(err)
			}
			c := st.config()
			c.DuplicatePolicy = tt.policy
			s, _ := openWith(t, c, sink.Deps{Metrics: m.ForSinks()})
			var got []sink.Result
			got = append(got, s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})...)
			s.now = func() time.Time { return shapestest.Stored.Add(time.Second) }
			got = append(got, s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()})...)
			if diff := cmp.Diff(tt.want, summarize(got)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if tt.policy == "fail_existing" && !strings.Contains(got[1].Err.Error(), "S3 object key already exists") {
				t.Errorf("error %q, want the spec's text", got[1].Err)
			}
			body, _ := st.object(t, "idempotency-key/stream-sequence_ORDERS_42.json")
			if !bytes.Contains(body, tt.wantStored) {
				t.Errorf("stored object does not contain %s", tt.wantStored)
			}
			if n := s.duplicates.(*telemetry.Counter).Value(); n != tt.wantDups {
				t.Errorf("s3_duplicates_total = %d, want %d", n, tt.wantDups)
			}
			// One PUT per write, and a HEAD to read the identity of an
			// object that exists under skip_existing.
			wantReqs := 2.0
			if tt.policy == "skip_existing" {
				wantReqs = 3
			}
			if n := s.putSeconds.(*telemetry.Histogram).Summary().Count; n != wantReqs {
				t.Errorf("s3_put_seconds count = %v, want %v", n, wantReqs)
			}
			// skip_existing and fail_existing send If-None-Match: *;
			// replace never does.
			wantCond := 2
			if tt.policy == "replace" {
				wantCond = 0
			}
			if n := st.count(http.MethodPut, "*"); n != wantCond {
				t.Errorf("%d conditional PUTs, want %d", n, wantCond)
			}
		})
	}
}

// TestConditionalPutFallback runs against a store that answers conditional
// PUTs with 501: the first message switches the sink to HEAD-then-PUT (one
// warning), later ones never try a conditional PUT again, and duplicates are
// still found, by HEAD.
func TestConditionalPutFallback(t *testing.T) {
	st := newStore(t)
	st.setFront(refuseConditionalPut)
	var logs bytes.Buffer
	c := st.config()
	s, _ := openWith(t, c, sink.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("F", 1), shapestest.Envelope("F", 2)})
	rs = append(rs, s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("F", 1)})...)
	want := []res{{Outcome: sink.Committed}, {Outcome: sink.Committed}, {Outcome: sink.Duplicate}}
	if diff := cmp.Diff(want, summarize(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if n := st.count(http.MethodPut, "*"); n != 1 {
		t.Errorf("%d conditional PUTs, want 1 (the one answered 501)", n)
	}
	if n := st.count(http.MethodHead, ""); n != 4 {
		t.Errorf("%d HEADs, want 4 (one per message, and one to read the duplicate's identity)", n)
	}
	if n := st.count(http.MethodPut, ""); n != 3 {
		t.Errorf("%d PUTs in all, want 3 (the refused one and two plain ones)", n)
	}
	if got := strings.Count(logs.String(), "does not implement conditional PUT"); got != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", got, logs.String())
	}
	if diff := cmp.Diff([]string{"idempotency-key/stream-sequence_F_1.json", "idempotency-key/stream-sequence_F_2.json"}, st.keys(t)); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// TestHeadModeFailExisting checks fail_existing through HEAD, against
// gofakes3 itself.
func TestHeadModeFailExisting(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.ExistenceCheck, c.DuplicatePolicy = "head", "fail_existing"
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("H", 1)})
	rs = append(rs, s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("H", 1)})...)
	if diff := cmp.Diff([]res{{Outcome: sink.Committed}, {sink.Permanent, sink.PermanentSinkError}}, summarize(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if n := st.count(http.MethodPut, "*"); n != 0 {
		t.Errorf("%d conditional PUTs in head mode, want 0", n)
	}
}

// TestSidecarHeals simulates a crash between the object and its sidecar:
// the sidecar PUT fails, the message is Temporary, and the redelivery finds
// the object (Duplicate) and writes the missing sidecar.
func TestSidecarHeals(t *testing.T) {
	st := newStore(t)
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".metadata.json") {
			s3Error(w, http.StatusServiceUnavailable, "SlowDown")
			return true
		}
		return false
	})
	c := st.config()
	c.MetadataMode = "sidecar"
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("H", 1)})
	if rs[0].Outcome != sink.Temporary || !strings.Contains(rs[0].Err.Error(), "sidecar") {
		t.Fatalf("sidecar failure = %+v, want Temporary naming the sidecar", rs[0])
	}
	if diff := cmp.Diff([]string{"idempotency-key/stream-sequence_H_1.json"}, st.keys(t)); diff != "" {
		t.Fatalf("keys after the failed sidecar (-want +got):\n%s", diff)
	}
	st.setFront(nil)
	rs = s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("H", 1)})
	if rs[0].Outcome != sink.Duplicate {
		t.Errorf("redelivery = %+v, want Duplicate", rs[0])
	}
	want := []string{"idempotency-key/stream-sequence_H_1.json", "idempotency-key/stream-sequence_H_1.metadata.json"}
	if diff := cmp.Diff(want, st.keys(t)); diff != "" {
		t.Errorf("keys after redelivery (-want +got):\n%s", diff)
	}
}

func TestServerSideEncryptionHeader(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.ServerSideEncryption = "AES256"
	s, _ := open(t, c)
	s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Envelope("E", 1)})
	reqs := st.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Amz-Server-Side-Encryption") != "AES256" {
		t.Errorf("requests %v, want one PUT with x-amz-server-side-encryption: AES256", reqs)
	}
}

// TestErrorClasses answers the first PUT of a batch of two with each error
// and checks the classes of docs/s3.md: the failing message's outcome, and
// NotAttempted for the next one after Temporary or Destination.
func TestErrorClasses(t *testing.T) {
	for _, tt := range []struct {
		status int
		code   string
		want   res
	}{
		{500, "InternalError", res{Outcome: sink.Temporary}},
		{503, "SlowDown", res{Outcome: sink.Temporary}},
		{429, "TooManyRequests", res{Outcome: sink.Temporary}},
		{408, "RequestTimeout", res{Outcome: sink.Temporary}},
		{400, "RequestTimeout", res{Outcome: sink.Temporary}},
		{409, "ConditionalRequestConflict", res{Outcome: sink.Temporary}},
		{403, "AccessDenied", res{Outcome: sink.Destination}},
		{403, "InvalidAccessKeyId", res{Outcome: sink.Destination}},
		{403, "SignatureDoesNotMatch", res{Outcome: sink.Destination}},
		{400, "ExpiredToken", res{Outcome: sink.Destination}},
		{400, "AuthorizationHeaderMalformed", res{Outcome: sink.Destination}},
		{301, "PermanentRedirect", res{Outcome: sink.Destination}},
		{404, "NoSuchKey", res{Outcome: sink.Destination}},
		{400, "InvalidArgument", res{sink.Permanent, sink.PermanentSinkError}},
		{400, "EntityTooLarge", res{sink.Permanent, sink.PermanentSinkError}},
	} {
		t.Run(tt.code, func(t *testing.T) {
			st := newStore(t)
			st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "_1.json") {
					s3Error(w, tt.status, tt.code)
					return true
				}
				return false
			})
			s, _ := open(t, st.config())
			got := summarize(s.WriteBatch(t.Context(), shapestest.Batch("X", 2)))
			next := res{Outcome: sink.Committed}
			if tt.want.Outcome != sink.Permanent {
				next = res{Outcome: sink.NotAttempted}
			}
			if diff := cmp.Diff([]res{tt.want, next}, got); diff != "" {
				t.Errorf("%d %s (-want +got):\n%s", tt.status, tt.code, diff)
			}
		})
	}
}

// TestMissingBucket uses gofakes3's own NoSuchBucket answer, on the
// conditional path and in head mode (where HEAD says 404 and the PUT finds
// the bucket missing).
func TestMissingBucket(t *testing.T) {
	for _, mode := range []string{"conditional_put", "head"} {
		t.Run(mode, func(t *testing.T) {
			st := newStore(t)
			c := st.config()
			c.Bucket, c.ExistenceCheck = "no-such-bucket", mode
			s, _ := open(t, c)
			rs := s.WriteBatch(t.Context(), shapestest.Batch("B", 2))
			if diff := cmp.Diff([]res{{Outcome: sink.Destination}, {Outcome: sink.NotAttempted}}, summarize(rs)); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if !strings.Contains(rs[0].Err.Error(), "NoSuchBucket") {
				t.Errorf("error %q does not name NoSuchBucket", rs[0].Err)
			}
		})
	}
}

// TestConcurrentDestinationStopsBatch checks concurrency > 1: a Destination
// failure leaves messages not yet started NotAttempted, and no result is
// Committed for a message that was not written.
func TestConcurrentDestinationStopsBatch(t *testing.T) {
	st := newStore(t)
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		s3Error(w, http.StatusForbidden, "AccessDenied")
		return true
	})
	c := st.config()
	c.Concurrency = 4
	s, _ := open(t, c)
	for i, r := range s.WriteBatch(t.Context(), shapestest.Batch("C", 40)) {
		if r.Outcome != sink.Destination && r.Outcome != sink.NotAttempted {
			t.Errorf("message %d = %v, want destination or not attempted", i, r.Outcome)
		}
	}
	if n := st.count(http.MethodPut, ""); n >= 40 {
		t.Errorf("%d PUTs for 40 messages after the first AccessDenied, want fewer", n)
	}
}

func TestUnreachableStoreIsTemporary(t *testing.T) {
	st := newStore(t)
	c := st.config()
	st.srv.Close() // connection refused from now on
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("U", 2))
	if diff := cmp.Diff([]res{{Outcome: sink.Temporary}, {Outcome: sink.NotAttempted}}, summarize(rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// TestRequestTimeout holds every request until the client gives up: the
// attempt's timeout makes the message Temporary.
func TestRequestTimeout(t *testing.T) {
	st := newStore(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server's Close: cleanups are LIFO
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		// Reading the body lets the server notice the client hanging up.
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	c := st.config()
	c.RequestTimeoutSeconds = 0.2
	s, _ := open(t, c)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("T", 1))
	if rs[0].Outcome != sink.Temporary {
		t.Errorf("stalled store = %+v, want Temporary", rs[0])
	}
}

func TestCredentialFailureIsDestination(t *testing.T) {
	st := newStore(t)
	s, _ := open(t, st.config())
	opts := s.client.Options()
	opts.Credentials = markCredentials{aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no credentials in the chain")
	})}
	s.client = s3.New(opts)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("K", 1))
	if rs[0].Outcome != sink.Destination || !strings.Contains(rs[0].Err.Error(), "credentials") {
		t.Errorf("credential failure = %+v, want Destination", rs[0])
	}
	if n := len(st.requests()); n != 0 {
		t.Errorf("%d requests sent without credentials, want 0", n)
	}
}

// TestRetries answers 503 twice, then lets the PUT through: with
// max_retries 2 the message is Committed after two back-off delays of the
// retry formula (exponential, base 100 ms, jitter u = 0.5).
func TestRetries(t *testing.T) {
	st := newStore(t)
	fails := 2
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if fails > 0 {
			fails--
			s3Error(w, http.StatusServiceUnavailable, "SlowDown")
			return true
		}
		return false
	})
	c := st.config()
	c.MaxRetries, c.RetryBackoffMS = 2, 100
	s, sl := open(t, c)
	rs := s.WriteBatch(t.Context(), shapestest.Batch("R", 1))
	if rs[0].Outcome != sink.Committed {
		t.Fatalf("result %+v, want Committed after two retries", rs[0])
	}
	if diff := cmp.Diff([]time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, sl.Delays()); diff != "" {
		t.Errorf("retry delays (-want +got):\n%s", diff)
	}
	if n := st.count(http.MethodPut, ""); n != 3 {
		t.Errorf("%d PUTs, want 3", n)
	}
}

// TestPermanentNotRetried checks that a 4xx that is the message's fault is
// returned at once, without retries.
func TestPermanentNotRetried(t *testing.T) {
	st := newStore(t)
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		s3Error(w, http.StatusBadRequest, "InvalidArgument")
		return true
	})
	c := st.config()
	c.MaxRetries = 3
	s, sl := open(t, c)
	if rs := s.WriteBatch(t.Context(), shapestest.Batch("P", 1)); rs[0].Outcome != sink.Permanent {
		t.Errorf("result %+v, want Permanent", rs[0])
	}
	if n := len(sl.Delays()); n != 0 {
		t.Errorf("%d retries of a permanent failure, want 0", n)
	}
}

func TestBackoff(t *testing.T) {
	c := Default()
	c.RetryBackoffMS, c.RetryMaxBackoffMS = 250, 5000
	for _, tt := range []struct {
		mode, jitter string
		attempt      int
		u            float64
		want         time.Duration
	}{
		{"exponential", "none", 1, 0, 250 * time.Millisecond},
		{"exponential", "none", 3, 0, time.Second},
		{"exponential", "none", 10, 0, 5 * time.Second},
		{"linear", "none", 3, 0, 750 * time.Millisecond},
		{"fixed", "none", 7, 0, 250 * time.Millisecond},
		{"exponential", "full", 2, 0.25, 125 * time.Millisecond},
		{"exponential", "equal", 2, 0.5, 375 * time.Millisecond},
	} {
		c.RetryBackoffMode, c.RetryJitter = tt.mode, tt.jitter
		if got := backoff(tt.attempt, &c, tt.u); got != tt.want {
			t.Errorf("backoff(%d, %s/%s, %v) = %v, want %v", tt.attempt, tt.mode, tt.jitter, tt.u, got, tt.want)
		}
	}
}

// TestHeadersOnlyMessage stores a headers-only message under the default
// strategy (stream-sequence key); its payload is the empty text envelope.
func TestHeadersOnlyMessage(t *testing.T) {
	st := newStore(t)
	c := st.config()
	c.ObjectFormat = "payload"
	s, _ := open(t, c)
	e := intake.Build(intake.Message{
		Subject: "audit.login",
		Reply:   "$JS.ACK.AUDIT.c.1.5.5.1780048800123456000.0",
		Header:  map[string][]string{"Nats-Msg-Size": {"2048"}},
	}, nil, shapestest.Received)
	if rs := s.WriteBatch(t.Context(), []*sink.Envelope{e}); rs[0].Outcome != sink.Committed {
		t.Fatalf("result %+v", rs[0])
	}
	body, _ := st.object(t, "idempotency-key/stream-sequence_AUDIT_5.json")
	want := `{"_nats_sinks":{"payload_encoding":"utf-8","payload_envelope_version":1,"payload_format":"text","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size_bytes":0},"payload":""}`
	if string(body) != want {
		t.Errorf("headers-only object = %s, want %s", body, want)
	}
}
