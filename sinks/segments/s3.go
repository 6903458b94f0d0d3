package segments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sys/unix"

	"github.com/nats-sinks/nats-sink/internal/s3conn"
	"github.com/nats-sinks/nats-sink/sink"
)

// Target s3: every segment is built in a flocked file in the staging
// directory and uploaded when it closes, as one conditional PutObject or,
// past multipart_part_bytes, a multipart upload. Its messages are held until
// the upload completed, so the staging copy never needs to be durable: a
// crash loses only unacknowledged messages, and start-up deletes what it
// left.

// maxPartUploads is how many parts of one segment are uploaded at once.
const maxPartUploads = 4

// s3target is the S3 side of a segments sink.
type s3target struct {
	client    *s3.Client
	bucket    string
	sse       bool
	timeout   time.Duration
	partBytes int64
	// directoryBucket is set for S3 Express One Zone bucket names, which
	// refuse Content-MD5 (as in the s3 sink).
	directoryBucket bool
}

// newS3Target creates the client from the connection keys (package
// s3conn, shared with the s3 sink). It makes no request.
func newS3Target(ctx context.Context, c *Config, deps sink.Deps) (*s3target, error) {
	client, err := s3conn.NewClient(ctx, c.settings(), deps)
	if err != nil {
		return nil, err
	}
	return &s3target{
		client:          client,
		bucket:          c.Bucket,
		sse:             c.ServerSideEncryption == "AES256",
		timeout:         time.Duration(c.RequestTimeoutSeconds * float64(time.Second)),
		partBytes:       int64(c.MultipartPartBytes),
		directoryBucket: strings.HasSuffix(c.Bucket, "--x-s3"),
	}, nil
}

// stagingDir returns the effective staging directory.
func (c *Config) stagingDir() (string, error) {
	if c.StagingDirectory == nil {
		return filepath.Join(os.TempDir(), "nats-sink-segments"), nil
	}
	return expandHome(*c.StagingDirectory)
}

// openStaging creates the staging directory (mode 0700) and opens it as the
// sink's root: open segments live there, flat.
func (s *Sink) openStaging() error {
	dir, err := s.cfg.stagingDir()
	if err != nil {
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "staging_directory", Message: err.Error()}}}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("segments sink staging directory %s: %w", dir, err)
	}
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		return &sink.ConfigError{Problems: []sink.Problem{{Path: "staging_directory", Message: fmt.Sprintf("%s exists and is not a directory", abs)}}}
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("create segments sink staging directory %s: %w", abs, err)
	}
	if s.root, err = filepath.EvalSymlinks(abs); err != nil {
		return fmt.Errorf("segments sink staging directory %s: %w", abs, err)
	}
	if s.rootfd, err = unix.Open(s.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return fmt.Errorf("open segments sink staging directory %s: %w", s.root, err)
	}
	return nil
}

// recoverStaging deletes every open segment in the staging directory that
// no live process holds: none of its messages was acknowledged.
func (s *Sink) recoverStaging(ctx context.Context) error {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return fmt.Errorf("segments sink recovery: %w", err)
	}
	var errs []error
	for _, d := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Type().IsRegular() && IsOpenName(d.Name()) {
			if err := s.recoverFile("", s.rootfd, d.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segments sink recovery: %w", err)
	}
	return nil
}

// createStaged makes a new open segment for location directory dir: a
// flocked file in the staging directory. Nothing is synced: the staging
// copy is not the durable one.
func (s *Sink) createStaged(dir string) (*segment, error) {
	dirfd, err := unix.Dup(s.rootfd)
	if err != nil {
		return nil, fmt.Errorf("segments sink staging directory: %w", classify(err))
	}
	seg := &segment{dir: dir, id: randomID(), dirfd: dirfd, born: s.now()}
	name := seg.openName(s.ext)
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		unix.Close(dirfd)
		return nil, fmt.Errorf("create staging file %s: %w", name, classify(err))
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		unix.Close(dirfd)
		return nil, fmt.Errorf("lock staging file %s: %w", name, err)
	}
	seg.fd = fd
	s.initHeld(seg)
	return seg, nil
}

// s3Class classifies an S3 error for a segment: the s3 sink's classes,
// except that what the s3 sink makes Permanent is Destination here — a
// segment is never one message's fault.
func s3Class(ctx context.Context, err error) error {
	err = s3conn.Classify(ctx, err)
	if sink.Failed(err).Outcome == sink.Permanent {
		return sink.AsDestination(err)
	}
	return err
}

// contentType returns the Content-Type of a segment object.
func contentType(ext string) string {
	switch ext {
	case ".jsonl.gz":
		return "application/gzip"
	case ".jsonl.zst":
		return "application/zstd"
	case ".parquet":
		return "application/vnd.apache.parquet"
	}
	return "application/x-ndjson"
}

// Schema names of JSON Lines segment objects (user metadata
// nats-sinks-schema); Parquet ones carry ParquetSchema.
const jsonlSchema = "nats_sinks.segment.jsonl.v1"

// objectMetadata returns the user metadata of seg's object.
func (s *Sink) objectMetadata(seg *segment) map[string]string {
	schema := jsonlSchema
	if s.cfg.Format == "parquet" {
		schema = ParquetSchema
	}
	return map[string]string{
		"nats-sinks-schema":                schema,
		"nats-sinks-segment-id":            seg.id,
		"nats-sinks-records":               strconv.Itoa(seg.records),
		"nats-sinks-first-stream-sequence": strconv.FormatUint(seg.first, 10),
		"nats-sinks-last-stream-sequence":  strconv.FormatUint(seg.last, 10),
	}
}

// readAt reads n bytes of seg's staging file at off.
func readAt(fd int, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	got := 0
	for got < len(b) {
		k, err := unix.Pread(fd, b[got:], off+int64(got))
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, err
		}
		if k == 0 {
			return nil, fmt.Errorf("staging file ends after %d of %d bytes", off+int64(got), off+n)
		}
		got += k
	}
	return b, nil
}

// upload stores seg's staging file (size bytes) as key, retrying failures
// until commit_timeout_ms has passed since start or ctx ends. A 412 answer
// to the conditional request means an earlier attempt of this commit, whose
// answer was lost, stored the object (its name is random): success.
func (s *Sink) upload(ctx context.Context, seg *segment, key string, size int64, start time.Time) error {
	if size > s.s3.partBytes {
		return s.uploadMultipart(ctx, seg, key, size, start)
	}
	body, err := readAt(seg.fd, 0, size)
	if err != nil {
		return fmt.Errorf("read staging file of %s: %w", key, classify(err))
	}
	sum := s3conn.ContentMD5(body)
	meta := s.objectMetadata(seg)
	return s.retry(ctx, start, func() error {
		in := &s3.PutObjectInput{
			Bucket:        &s.s3.bucket,
			Key:           aws.String(key),
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(size),
			ContentType:   aws.String(contentType(s.ext)),
			Metadata:      meta,
			IfNoneMatch:   aws.String("*"),
		}
		s.s3.checksum(&in.ContentMD5, &in.ChecksumAlgorithm, sum)
		if s.s3.sse {
			in.ServerSideEncryption = types.ServerSideEncryptionAes256
		}
		actx, cancel := context.WithTimeout(ctx, s.s3.timeout)
		_, err := s.s3.client.PutObject(actx, in)
		cancel()
		if err == nil || s3conn.IsExists(err) {
			return nil
		}
		return fmt.Errorf("upload segment %s: %w", key, s3Class(ctx, err))
	})
}

// checksum sets Content-MD5, or, for a directory bucket, which refuses it,
// the SDK's CRC32.
func (t *s3target) checksum(md5 **string, alg *types.ChecksumAlgorithm, sum string) {
	if t.directoryBucket {
		*alg = types.ChecksumAlgorithmCrc32
		return
	}
	*md5 = aws.String(sum)
}

// uploadMultipart stores seg as key in parts of multipart_part_bytes, at
// most maxPartUploads at once. Parts that were uploaded survive a retry; a
// failed commit aborts the upload.
func (s *Sink) uploadMultipart(ctx context.Context, seg *segment, key string, size int64, start time.Time) error {
	t := s.s3
	n := int((size + t.partBytes - 1) / t.partBytes)
	etags := make([]*string, n)
	var uploadID *string
	err := s.retry(ctx, start, func() error {
		if uploadID == nil {
			in := &s3.CreateMultipartUploadInput{
				Bucket:      &t.bucket,
				Key:         aws.String(key),
				ContentType: aws.String(contentType(s.ext)),
				Metadata:    s.objectMetadata(seg),
			}
			if t.sse {
				in.ServerSideEncryption = types.ServerSideEncryptionAes256
			}
			actx, cancel := context.WithTimeout(ctx, t.timeout)
			out, err := t.client.CreateMultipartUpload(actx, in)
			cancel()
			if err != nil {
				return fmt.Errorf("start multipart upload of segment %s: %w", key, s3Class(ctx, err))
			}
			uploadID = out.UploadId
			clear(etags)
		}
		if err := s.uploadParts(ctx, seg.fd, key, uploadID, size, etags); err != nil {
			return err
		}
		parts := make([]types.CompletedPart, n)
		for i, e := range etags {
			parts[i] = types.CompletedPart{ETag: e, PartNumber: aws.Int32(int32(i + 1))}
		}
		actx, cancel := context.WithTimeout(ctx, t.timeout)
		_, err := t.client.CompleteMultipartUpload(actx, &s3.CompleteMultipartUploadInput{
			Bucket:          &t.bucket,
			Key:             aws.String(key),
			UploadId:        uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			IfNoneMatch:     aws.String("*"),
		})
		cancel()
		switch {
		case err == nil || s3conn.IsExists(err):
			return nil
		case isNoSuchUpload(err):
			// An earlier Complete whose answer was lost may have finished
			// it: the object under this random name is then ours.
			if ok, herr := s.objectIs(ctx, key, seg.id); herr == nil && ok {
				return nil
			}
			uploadID = nil
		}
		return fmt.Errorf("complete multipart upload of segment %s: %w", key, s3Class(ctx, err))
	})
	if err != nil && uploadID != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout)
		if _, aerr := t.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &t.bucket, Key: aws.String(key), UploadId: uploadID}); aerr != nil {
			s.log.Warn("abort of a failed multipart upload failed; the bucket's AbortIncompleteMultipartUpload rule or the next start removes it",
				"key", key, "error", aerr)
		}
		cancel()
	}
	return err
}

// uploadParts uploads the parts whose ETag is still missing.
func (s *Sink) uploadParts(ctx context.Context, fd int, key string, uploadID *string, size int64, etags []*string) error {
	t := s.s3
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, maxPartUploads)
	)
	for i := range etags {
		if etags[i] != nil {
			continue
		}
		sem <- struct{}{}
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			off := int64(i) * t.partBytes
			body, err := readAt(fd, off, min(t.partBytes, size-off))
			if err != nil {
				err = fmt.Errorf("read staging file of %s: %w", key, classify(err))
			} else {
				in := &s3.UploadPartInput{
					Bucket:        &t.bucket,
					Key:           aws.String(key),
					UploadId:      uploadID,
					PartNumber:    aws.Int32(int32(i + 1)),
					Body:          bytes.NewReader(body),
					ContentLength: aws.Int64(int64(len(body))),
				}
				t.checksum(&in.ContentMD5, &in.ChecksumAlgorithm, s3conn.ContentMD5(body))
				actx, cancel := context.WithTimeout(ctx, t.timeout)
				out, uerr := t.client.UploadPart(actx, in)
				cancel()
				if uerr == nil {
					mu.Lock()
					etags[i] = out.ETag
					mu.Unlock()
					return
				}
				err = fmt.Errorf("upload part %d of segment %s: %w", i+1, key, s3Class(ctx, uerr))
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return first
}

func isNoSuchUpload(err error) bool {
	status, code := s3conn.Response(err)
	return code == "NoSuchUpload" || status == http.StatusNotFound
}

// objectIs reports whether key exists and is the segment id's object.
func (s *Sink) objectIs(ctx context.Context, key, id string) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, s.s3.timeout)
	defer cancel()
	out, err := s.s3.client.HeadObject(actx, &s3.HeadObjectInput{Bucket: &s.s3.bucket, Key: aws.String(key)})
	if err != nil {
		return false, err
	}
	for k, v := range out.Metadata {
		if strings.EqualFold(k, "nats-sinks-segment-id") {
			return v == id, nil
		}
	}
	return false, nil
}

// abortStale aborts incomplete multipart uploads under the prefix whose key
// ends in a segment's final name and that began more than twice
// commit_timeout_ms ago: a live process finishes or aborts its own sooner.
// A refused listing or abort is only a warning.
func (s *Sink) abortStale(ctx context.Context) {
	t := s.s3
	cutoff := s.now().Add(-2 * s.cfg.commitTimeout())
	in := &s3.ListMultipartUploadsInput{Bucket: &t.bucket}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, t.timeout)
		out, err := t.client.ListMultipartUploads(actx, in)
		cancel()
		if err != nil {
			s.log.Warn("listing incomplete multipart uploads failed; stale segment uploads are not aborted", "bucket", t.bucket, "error", err)
			return
		}
		for _, u := range out.Uploads {
			key := aws.ToString(u.Key)
			if !finalName.MatchString(path.Base(key)) || u.Initiated == nil || !u.Initiated.Before(cutoff) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, t.timeout)
			_, err := t.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &t.bucket, Key: u.Key, UploadId: u.UploadId})
			cancel()
			if err != nil {
				s.log.Warn("abort of a stale multipart upload failed", "key", key, "error", err)
				continue
			}
			s.log.Info("aborted a stale multipart upload", "key", key)
		}
		if !aws.ToBool(out.IsTruncated) {
			return
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// headBucket checks the bucket for the health check: 403 is a destination
// error, 404 a missing bucket.
func (s *Sink) headBucket(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, s.s3.timeout)
	defer cancel()
	_, err := s.s3.client.HeadBucket(actx, &s3.HeadBucketInput{Bucket: &s.s3.bucket})
	if err == nil {
		return nil
	}
	switch status, _ := s3conn.Response(err); status {
	case http.StatusForbidden:
		return sink.AsDestination(fmt.Errorf("segments sink healthcheck: bucket %s: access denied: %w", s.s3.bucket, err))
	case http.StatusNotFound:
		return sink.AsDestination(fmt.Errorf("segments sink healthcheck: bucket %s does not exist: %w", s.s3.bucket, err))
	}
	return fmt.Errorf("segments sink healthcheck: bucket %s: %w", s.s3.bucket, s3Class(ctx, err))
}
