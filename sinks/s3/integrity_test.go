package s3sink

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// TestIntegrityHeaders writes the golden message (object and sidecar) over
// plain HTTP and over HTTPS and checks what reached gofakes3: the golden
// bytes unchanged (no aws-chunked framing, which stores without trailer
// support would keep as part of the object), Content-MD5 of exactly those
// bytes on every PUT, If-None-Match: * still sent, and the payload hash the
// SDK signs: the body's SHA-256 over HTTP, UNSIGNED-PAYLOAD over HTTPS
// (where TLS and Content-MD5 protect the body).
func TestIntegrityHeaders(t *testing.T) {
	for _, tt := range []struct {
		name     string
		newStore func(testing.TB) *store
		https    bool
	}{{"http", newStore, false}, {"https", newTLSStore, true}} {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.newStore(t)
			c := st.config()
			c.Prefix = ptr("nats/orders")
			c.MetadataMode = "sidecar"
			c.ObjectMetadata = map[string]string{"team": "billing"}
			s, _ := open(t, c)
			if diff := cmp.Diff([]res{{Outcome: sink.Committed}}, summarize(s.WriteBatch(t.Context(), []*sink.Envelope{shapestest.Golden()}))); diff != "" {
				t.Fatalf("results (-want +got):\n%s", diff)
			}
			golden := map[string]string{
				"/" + testBucket + "/nats/orders/idempotency-key/stream-sequence_ORDERS_42.json":          "testdata/object_golden.json",
				"/" + testBucket + "/nats/orders/idempotency-key/stream-sequence_ORDERS_42.metadata.json": "testdata/sidecar_golden.json",
			}
			puts := 0
			for _, r := range st.requests() {
				if r.Method != http.MethodPut {
					continue
				}
				puts++
				want, err := os.ReadFile(golden[r.Path])
				if err != nil {
					t.Fatalf("PUT %s: %v", r.Path, err)
				}
				body, _ := st.object(t, strings.TrimPrefix(r.Path, "/"+testBucket+"/"))
				if !bytes.Equal(body, want) {
					t.Errorf("%s stored %q, want the golden bytes", r.Path, body)
				}
				md5sum := md5.Sum(want)
				if got, want := r.Header.Get("Content-Md5"), base64.StdEncoding.EncodeToString(md5sum[:]); got != want {
					t.Errorf("%s Content-MD5 %q, want %q", r.Path, got, want)
				}
				shasum := sha256.Sum256(want)
				wantSHA := hex.EncodeToString(shasum[:])
				if tt.https {
					wantSHA = "UNSIGNED-PAYLOAD"
				}
				if got := r.Header.Get("X-Amz-Content-Sha256"); got != wantSHA {
					t.Errorf("%s X-Amz-Content-Sha256 %q, want %q", r.Path, got, wantSHA)
				}
				if got := r.Header.Get("If-None-Match"); got != "*" {
					t.Errorf("%s If-None-Match %q, want *", r.Path, got)
				}
				if te, ce := r.Header.Get("X-Amz-Trailer"), r.Header.Get("Content-Encoding"); te != "" || strings.Contains(ce, "aws-chunked") {
					t.Errorf("%s X-Amz-Trailer %q, Content-Encoding %q; want a plain body", r.Path, te, ce)
				}
			}
			if puts != 2 {
				t.Errorf("%d PUTs, want 2 (object and sidecar)", puts)
			}
		})
	}
}

// TestCorruptedBodyIsNotCommitted changes one byte of the body on its way
// to the store: the store's Content-MD5 check refuses it (400 BadDigest),
// the message is Temporary and nothing is stored; the redelivery commits.
func TestCorruptedBodyIsNotCommitted(t *testing.T) {
	st := newStore(t)
	st.setFront(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut {
			b, _ := io.ReadAll(r.Body)
			b[len(b)/2] ^= 0x20
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		return false // on to gofakes3
	})
	s, _ := open(t, st.config())
	e := shapestest.Envelope("C", 1)
	rs := s.WriteBatch(t.Context(), []*sink.Envelope{e})
	if diff := cmp.Diff([]res{{Outcome: sink.Temporary}}, summarize(rs)); diff != "" {
		t.Fatalf("corrupted PUT (-want +got):\n%s", diff)
	}
	if !strings.Contains(rs[0].Err.Error(), "BadDigest") {
		t.Errorf("error %q does not name BadDigest", rs[0].Err)
	}
	if keys := st.keys(t); len(keys) != 0 {
		t.Fatalf("stored %v after a corrupted PUT", keys)
	}
	st.setFront(nil)
	if diff := cmp.Diff([]res{{Outcome: sink.Committed}}, summarize(s.WriteBatch(t.Context(), []*sink.Envelope{e}))); diff != "" {
		t.Fatalf("redelivery (-want +got):\n%s", diff)
	}
}

// TestDirectoryBucketChecksum: S3 Express One Zone directory buckets refuse
// Content-MD5, so their PUTs ask the SDK for its CRC32 instead. (The SDK
// needs a real CreateSession to reach such a bucket; only the request
// built is checked here.)
func TestDirectoryBucketChecksum(t *testing.T) {
	body := []byte(`{"a":1}`)
	for _, tt := range []struct {
		bucket  string
		wantMD5 bool
	}{{"archive", true}, {"archive--use1-az4--x-s3", false}} {
		c := Default()
		c.Bucket = tt.bucket
		c.CredentialMode = "environment"
		c.AWSAccessKeyIDEnv, c.AWSSecretAccessKeyEnv = ptr("TEST_AWS_KEY_ID"), ptr("TEST_AWS_SECRET")
		s, _ := open(t, c)
		in := s.putInput(object{key: "k.json", body: body}, true)
		sum := md5.Sum(body)
		switch {
		case tt.wantMD5 && (in.ContentMD5 == nil || *in.ContentMD5 != base64.StdEncoding.EncodeToString(sum[:]) || in.ChecksumAlgorithm != ""):
			t.Errorf("%s: ContentMD5 %v, ChecksumAlgorithm %q; want the body's MD5 and no algorithm", tt.bucket, in.ContentMD5, in.ChecksumAlgorithm)
		case !tt.wantMD5 && (in.ContentMD5 != nil || in.ChecksumAlgorithm != types.ChecksumAlgorithmCrc32):
			t.Errorf("%s: ContentMD5 %v, ChecksumAlgorithm %q; want no MD5 and CRC32", tt.bucket, in.ContentMD5, in.ChecksumAlgorithm)
		}
	}
}
