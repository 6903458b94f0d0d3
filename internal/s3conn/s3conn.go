// Package s3conn is the S3 connection code the s3 and segments sinks share:
// the validation rules of the connection keys (bucket, endpoint_url,
// allow_http_for_local_testing, credential_mode and its keys), the client
// built from them, the Content-MD5 of a body, and the classification of an
// S3 answer into the sink contract's outcome classes (docs/s3.md).
//
// Both sinks keep their own configuration structs (the keys differ around
// the connection), and pass the connection keys in as Settings.
package s3conn

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nats-sinks/nats-sink/internal/urlcheck"
	"github.com/nats-sinks/nats-sink/sink"
)

// Settings are the connection keys of a sink that writes to S3.
type Settings struct {
	// Name starts error texts: "s3 sink", "segments sink".
	Name                     string
	EndpointURL              *string
	AllowHTTPForLocalTesting bool
	RegionName               *string
	CredentialMode           string // default_chain, environment, profile
	ProfileName              *string
	AccessKeyIDEnv           *string
	SecretAccessKeyEnv       *string
	SessionTokenEnv          *string
	// MaxIdleConnsPerHost sizes the connection pool for every writer of
	// the process.
	MaxIdleConnsPerHost int
}

// AddFunc records one configuration problem at a path relative to the sink
// object.
type AddFunc func(path, format string, args ...any)

// CheckBucket returns the problem with a bucket name that the pattern
// ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ lets through, or "".
func CheckBucket(b string) string {
	switch {
	case strings.Contains(b, ".."), strings.Contains(b, ".-"), strings.Contains(b, "-."):
		return fmt.Sprintf("must not contain \"..\", \".-\" or \"-.\" (got %q)", b)
	case net.ParseIP(b) != nil:
		return fmt.Sprintf("must not be an IP address (got %q)", b)
	}
	return ""
}

// CheckEndpoint returns the problem with endpoint_url, or "".
func CheckEndpoint(raw string, allowHTTP bool) string {
	r := urlcheck.Rules{
		SchemeProblem:       "must use https",
		UserInfoProblem:     "must not contain credentials; use credential_mode",
		NoPath:              "must not contain a path (path-style addressing adds the bucket)",
		HTTPLoopbackProblem: "http is allowed only for localhost, 127.0.0.1 or ::1",
	}
	if !allowHTTP {
		r.HTTPRefused = "must use https (http is allowed only with allow_http_for_local_testing and a loopback host)"
	}
	return r.Check(raw)
}

// CredentialProblems checks credential_mode and the keys that belong to
// each mode. Credentials themselves never appear in the file: only the
// names of the variables or the profile that hold them.
func (c *Settings) CredentialProblems(add AddFunc) {
	switch {
	case c.CredentialMode == "profile" && c.ProfileName == nil:
		add("profile_name", "required with credential_mode profile")
	case c.CredentialMode != "profile" && c.ProfileName != nil:
		add("profile_name", "only allowed with credential_mode profile")
	}
	envKeys := []struct {
		path     string
		v        *string
		required bool
	}{
		{"aws_access_key_id_env", c.AccessKeyIDEnv, true},
		{"aws_secret_access_key_env", c.SecretAccessKeyEnv, true},
		{"aws_session_token_env", c.SessionTokenEnv, false},
	}
	for _, k := range envKeys {
		switch {
		case c.CredentialMode == "environment" && k.required && k.v == nil:
			add(k.path, "required with credential_mode environment")
		case c.CredentialMode != "environment" && k.v != nil:
			add(k.path, "only allowed with credential_mode environment")
		}
	}
}

// NewClient reads the credentials' environment variables (through deps) or
// profile and creates the S3 client. It makes no request. Missing variables
// and profiles are configuration errors (*sink.ConfigError naming the key,
// or wrapping sink.ErrConfig).
func NewClient(ctx context.Context, c Settings, deps sink.Deps) (*s3.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		// Retries happen in the sink, per its own rules, so that one
		// policy and one metric cover every attempt.
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		// The SDK's buildable client follows only method-preserving
		// redirects (307, 308): a 301 answered to a PUT must not turn into
		// a GET whose 200 would read as success. It also honours
		// AWS_CA_BUNDLE. Idle connections are sized for every writer of
		// the process.
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = max(c.MaxIdleConnsPerHost, 2)
		})),
	}
	if c.RegionName != nil {
		opts = append(opts, awsconfig.WithRegion(*c.RegionName))
	}
	switch c.CredentialMode {
	case "environment":
		p, err := c.envCredentials(deps)
		if err != nil {
			return nil, err
		}
		opts = append(opts, awsconfig.WithCredentialsProvider(p))
	case "profile":
		opts = append(opts, awsconfig.WithSharedConfigProfile(*c.ProfileName))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		// Loading reads only the environment and the shared config and
		// credentials files: a failure is a configuration problem, and
		// with a named profile that profile is to blame.
		if c.CredentialMode == "profile" {
			return nil, &sink.ConfigError{Problems: []sink.Problem{{Path: "profile_name",
				Message: fmt.Sprintf("cannot load AWS configuration: %v", err)}}}
		}
		return nil, fmt.Errorf("%s: load AWS configuration: %w: %w", c.Name, err, sink.ErrConfig)
	}
	if awsCfg.Region == "" {
		// SigV4 needs a region; us-east-1 is what S3-compatible stores
		// expect by default, and AWS answers a wrong one with a redirect
		// that is reported as a destination failure.
		awsCfg.Region = "us-east-1"
	}
	if awsCfg.Credentials != nil {
		awsCfg.Credentials = MarkCredentials{awsCfg.Credentials}
	}
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// The configuration file is the authority on where data goes: an
		// AWS_ENDPOINT_URL(_S3) in the environment is not applied.
		o.BaseEndpoint = c.EndpointURL
		if c.EndpointURL != nil {
			o.BaseEndpoint = aws.String(strings.TrimSuffix(*c.EndpointURL, "/"))
		}
		o.UsePathStyle = c.EndpointURL != nil
		o.Retryer = aws.NopRetryer{}
		// The SDK's default (WhenSupported) adds a CRC32 to every PUT; over
		// HTTPS it sends it as an aws-chunked trailer, which costs ~20 % of
		// the client's CPU per PUT and which stores without trailer
		// support keep as part of the object (gofakes3 does: the chunk
		// framing ends up in the stored bytes). Content-MD5, set on every
		// upload, is understood by every S3-compatible store and gives it
		// the same end-to-end check of the body (BadDigest on a mismatch).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// envCredentials reads the variables named by aws_*_env.
func (c *Settings) envCredentials(deps sink.Deps) (aws.CredentialsProvider, error) {
	var probs []sink.Problem
	read := func(path string, name *string) string {
		if name == nil {
			return ""
		}
		v, ok := deps.LookupEnv(*name)
		switch {
		case !ok:
			probs = append(probs, sink.Problem{Path: path, Message: fmt.Sprintf("environment variable %s is not set", *name)})
		case strings.TrimSpace(v) == "":
			probs = append(probs, sink.Problem{Path: path, Message: fmt.Sprintf("environment variable %s must not be blank", *name)})
		case strings.TrimSpace(v) != v:
			probs = append(probs, sink.Problem{Path: path, Message: fmt.Sprintf("environment variable %s must not have surrounding whitespace", *name)})
		}
		return v
	}
	id := read("aws_access_key_id_env", c.AccessKeyIDEnv)
	secret := read("aws_secret_access_key_env", c.SecretAccessKeyEnv)
	token := read("aws_session_token_env", c.SessionTokenEnv)
	if probs != nil {
		return nil, &sink.ConfigError{Problems: probs}
	}
	return credentials.NewStaticCredentialsProvider(id, secret, token), nil
}

// MarkCredentials marks credential failures so that Classify can tell them
// from network errors: missing or unusable credentials fail every message
// alike (Destination).
type MarkCredentials struct{ aws.CredentialsProvider }

// Retrieve returns the wrapped provider's credentials, marking its error.
func (m MarkCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.CredentialsProvider.Retrieve(ctx)
	return c, CredentialsFailure(err)
}

// CredentialsFailure marks an error of a credentials provider (nil stays
// nil), so that Classify makes it Destination.
func CredentialsFailure(err error) error {
	if err == nil {
		return nil
	}
	return &credentialsError{err}
}

type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return "AWS credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// ContentMD5 returns the Content-MD5 header value of body: base64 of its
// MD5. The store recomputes it and refuses a body that differs (BadDigest,
// Temporary), so a corrupted transfer is never committed. MD5 serves here as
// a transfer checksum, which S3 still requires for some operations, not as a
// security hash: SigV4 and TLS authenticate the request.
func ContentMD5(body []byte) string {
	sum := md5.Sum(body)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Response returns the HTTP status and S3 error code of err; status 0 means
// no response was received.
func Response(err error) (status int, code string) {
	if re, ok := errors.AsType[*awshttp.ResponseError](err); ok {
		status = re.HTTPStatusCode()
	}
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		code = ae.ErrorCode()
	}
	return status, code
}

// IsExists reports whether err is the answer to a conditional PUT whose key
// exists. ConditionalRequestConflict (409) is deliberately not: S3 sends it
// while another conditional write of the key is in flight, whose outcome is
// unknown, so it is Temporary (see docs/s3.md).
func IsExists(err error) bool {
	status, code := Response(err)
	return status == http.StatusPreconditionFailed || code == "PreconditionFailed"
}

// IsNotImplemented reports whether the store refused a request as not
// implemented.
func IsNotImplemented(err error) bool {
	status, code := Response(err)
	return status == http.StatusNotImplemented || code == "NotImplemented"
}

// IsNotFound reports whether the store answered 404 (or NoSuchKey).
func IsNotFound(err error) bool {
	status, code := Response(err)
	return status == http.StatusNotFound || code == "NoSuchKey"
}

// destinationCodes fail every message alike: credentials, permissions, the
// bucket, the region, the account (docs/s3.md plus the codes AWS uses for
// the same conditions).
var destinationCodes = map[string]bool{
	"AccessDenied": true, "AllAccessDisabled": true, "AccountProblem": true,
	"AuthorizationHeaderMalformed": true, "ExpiredToken": true, "InvalidAccessKeyId": true,
	"InvalidBucketName": true, "InvalidToken": true, "NoSuchBucket": true,
	"NotSignedUp": true, "PermanentRedirect": true, "RequestTimeTooSkewed": true,
	"SignatureDoesNotMatch": true, "TokenRefreshRequired": true, "InvalidRegion": true,
	"IllegalLocationConstraintException": true,
}

// temporaryCodes are 400-class answers about the transfer, not the object:
// a retry sends the same bytes again.
var temporaryCodes = map[string]bool{
	"RequestTimeout": true, "IncompleteBody": true, "BadDigest": true,
	"XAmzContentSHA256Mismatch": true, "SlowDown": true, "OperationAborted": true,
	"ConditionalRequestConflict": true,
}

// Classify marks err with its outcome class (docs/s3.md): no response,
// timeouts, 5xx, 408, 409, 425, 429 → Temporary; credential failures, 401,
// 403, 404, 301 and the destination codes → Destination; any other 4xx →
// Permanent. ctx is the write's context: once it is done, everything is
// Temporary.
func Classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	if _, ok := errors.AsType[*credentialsError](err); ok {
		return sink.AsDestination(err)
	}
	status, code := Response(err)
	if status == 0 {
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return err
		}
		if _, ok := errors.AsType[*smithyhttp.RequestSendError](err); ok {
			return err // connection refused, reset, DNS: Temporary
		}
		if _, ok := errors.AsType[*aws.RequestCanceledError](err); ok {
			return err
		}
		// The request was never sent (endpoint resolution, signing,
		// serialisation of a validated input): our configuration or
		// environment, the same for every message.
		return sink.AsDestination(err)
	}
	switch {
	case destinationCodes[code]:
		return sink.AsDestination(err)
	case temporaryCodes[code]:
		return err
	case status >= 500, status == 408, status == 409, status == 425, status == 429:
		return err
	case status == 401, status == 403, status == 404, status == 301:
		return sink.AsDestination(err)
	case status >= 400:
		return sink.AsPermanent(err)
	}
	return err // other 3xx, or an unexpected status: outcome unknown
}

// prefixSegment is the rule of one '/'-separated segment of a key prefix.
var prefixSegment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.=-]{0,127}$`)

// CheckPrefix returns the problem with a key prefix, or "": '/'-separated
// segments, each matching prefixSegment and not "." or "..", without a
// leading or trailing '/'.
func CheckPrefix(p string) string {
	switch {
	case strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/"):
		return fmt.Sprintf("must not start or end with \"/\" (got %q)", p)
	case strings.Contains(p, "//"):
		return fmt.Sprintf("must not contain \"//\" (got %q)", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("segment %q is not allowed", seg)
		}
		if !prefixSegment.MatchString(seg) {
			return fmt.Sprintf("segment %q must match %s", seg, prefixSegment)
		}
	}
	return ""
}
