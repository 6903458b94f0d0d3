package s3conn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-sinks/nats-sink/sink"
)

func TestCheckBucket(t *testing.T) {
	for b, bad := range map[string]bool{
		"lake": false, "my-lake.eu": false, "a..b": true, "a.-b": true, "a-.b": true, "192.168.1.10": true,
	} {
		if got := CheckBucket(b); (got != "") != bad {
			t.Errorf("CheckBucket(%q) = %q, want a problem: %v", b, got, bad)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, tt := range []struct {
		url       string
		allowHTTP bool
		want      string // part of the problem; "" = none
	}{
		{"https://s3.example.com", false, ""},
		{"https://s3.example.com:9000/", false, ""},
		{"http://127.0.0.1:9000", true, ""},
		{"http://localhost:9000", true, ""},
		{"http://[::1]:9000", true, ""},
		{"http://127.0.0.1:9000", false, "allow_http_for_local_testing"},
		{"http://s3.example.com", true, "only for localhost"},
		{"ftp://s3.example.com", false, "must use https"},
		{"https://key:secret@s3.example.com", false, "must not contain credentials"},
		{"https://s3.example.com/bucket", false, "must not contain a path"},
	} {
		got := CheckEndpoint(tt.url, tt.allowHTTP)
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("CheckEndpoint(%q, %v) = %q, want %q", tt.url, tt.allowHTTP, got, tt.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("CheckEndpoint(%q) echoes the password: %q", tt.url, got)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for p, bad := range map[string]bool{
		"raw": false, "raw/dt=2026": false, "a_b.c-d": false,
		"/raw": true, "raw/": true, "a//b": true, "a/../b": true, "a/./b": true, ".hidden": true, "a b": true,
		strings.Repeat("x", 129): true,
	} {
		if got := CheckPrefix(p); (got != "") != bad {
			t.Errorf("CheckPrefix(%q) = %q, want a problem: %v", p, got, bad)
		}
	}
}

func TestCredentialProblems(t *testing.T) {
	name := "X"
	for _, tt := range []struct {
		s    Settings
		want []string // paths with a problem
	}{
		{Settings{CredentialMode: "default_chain"}, nil},
		{Settings{CredentialMode: "profile"}, []string{"profile_name"}},
		{Settings{CredentialMode: "profile", ProfileName: &name}, nil},
		{Settings{CredentialMode: "default_chain", ProfileName: &name}, []string{"profile_name"}},
		{Settings{CredentialMode: "environment"}, []string{"aws_access_key_id_env", "aws_secret_access_key_env"}},
		{Settings{CredentialMode: "environment", AccessKeyIDEnv: &name, SecretAccessKeyEnv: &name, SessionTokenEnv: &name}, nil},
		{Settings{CredentialMode: "default_chain", SessionTokenEnv: &name}, []string{"aws_session_token_env"}},
	} {
		var got []string
		tt.s.CredentialProblems(func(path, format string, args ...any) { got = append(got, path) })
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%+v: problems at %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestContentMD5 checks the header against the RFC 1321 test vectors
// (base64 as openssl md5 -binary | base64 prints them).
func TestContentMD5(t *testing.T) {
	for body, want := range map[string]string{
		"":    "1B2M2Y8AsgTpgAmY7PhCfg==", // d41d8cd98f00b204e9800998ecf8427e
		"abc": "kAFQmDzST7DWlj99KOF/cg==", // 900150983cd24fb0d6963f7d28e17f72
	} {
		if got := ContentMD5([]byte(body)); got != want {
			t.Errorf("ContentMD5(%q) = %s, want %s", body, got, want)
		}
	}
}

// store answers every request with status and an S3 error document of
// code, and counts the requests.
func store(t *testing.T, status int, code string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if code != "" {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>m</Message></Error>`, code)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func client(t *testing.T, endpoint string) *s3.Client {
	t.Helper()
	id, secret := "ID", "SECRET"
	env := map[string]string{"ID": "AKIDTEST", "SECRET": "secret"}
	c, err := NewClient(t.Context(), Settings{Name: "test sink", EndpointURL: &endpoint, CredentialMode: "environment",
		AccessKeyIDEnv: &id, SecretAccessKeyEnv: &secret},
		sink.Deps{Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func put(ctx context.Context, c *s3.Client) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("k"),
		Body: strings.NewReader("x")})
	return err
}

// TestClassify sends a real PutObject to a store answering each status and
// code, and checks the outcome class of the SDK's error, that the client
// made exactly one request (retries belong to the sinks) and what
// Response, IsExists and IsNotFound read from it.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		status int
		code   string
		want   sink.Outcome
	}{
		{503, "SlowDown", sink.Temporary},
		{500, "InternalError", sink.Temporary},
		{429, "", sink.Temporary},
		{409, "ConditionalRequestConflict", sink.Temporary},
		{400, "RequestTimeout", sink.Temporary},
		{400, "BadDigest", sink.Temporary},
		{403, "AccessDenied", sink.Destination},
		{404, "NoSuchBucket", sink.Destination},
		{400, "InvalidAccessKeyId", sink.Destination},
		{301, "PermanentRedirect", sink.Destination},
		{401, "", sink.Destination},
		{400, "InvalidArgument", sink.Permanent},
		{412, "PreconditionFailed", sink.Permanent},
	} {
		t.Run(fmt.Sprint(tt.status, tt.code), func(t *testing.T) {
			srv, n := store(t, tt.status, tt.code)
			err := put(t.Context(), client(t, srv.URL))
			if err == nil {
				t.Fatal("PutObject succeeded")
			}
			if got := sink.Failed(Classify(t.Context(), err)).Outcome; got != tt.want {
				t.Errorf("outcome %v, want %v (error %v)", got, tt.want, err)
			}
			if n.Load() != 1 {
				t.Errorf("%d requests, want 1: the client must not retry", n.Load())
			}
			status, code := Response(err)
			if status != tt.status || code != tt.code && tt.code != "" {
				t.Errorf("Response = %d %q, want %d %q", status, code, tt.status, tt.code)
			}
			if IsExists(err) != (tt.status == 412) {
				t.Errorf("IsExists = %v", IsExists(err))
			}
			if IsNotFound(err) != (tt.status == 404) {
				t.Errorf("IsNotFound = %v", IsNotFound(err))
			}
		})
	}
}

// TestClassifyNoAnswer: a refused connection is Temporary, and so is every
// error once the write's context is done.
func TestClassifyNoAnswer(t *testing.T) {
	srv, _ := store(t, 200, "")
	url := srv.URL
	srv.Close()
	err := put(t.Context(), client(t, url))
	if got := sink.Failed(Classify(t.Context(), err)).Outcome; got != sink.Temporary {
		t.Errorf("connection refused: outcome %v, want Temporary (%v)", got, err)
	}
	denied, _ := store(t, 403, "AccessDenied")
	err = put(t.Context(), client(t, denied.URL))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got := sink.Failed(Classify(ctx, err)).Outcome; got != sink.Temporary {
		t.Errorf("403 classified after the write's context ended: outcome %v, want Temporary", got)
	}
}

// TestCredentialsFailureIsDestination: an error of the credentials provider
// fails every message alike.
func TestCredentialsFailureIsDestination(t *testing.T) {
	err := fmt.Errorf("put: %w", CredentialsFailure(errors.New("no credentials")))
	if got := sink.Failed(Classify(t.Context(), err)).Outcome; got != sink.Destination {
		t.Errorf("outcome %v, want Destination", got)
	}
	if CredentialsFailure(nil) != nil {
		t.Error("CredentialsFailure(nil) != nil")
	}
}

// TestNewClientEnvironment: a missing or blank variable is a configuration
// error naming the key, and the message never holds the value.
func TestNewClientEnvironment(t *testing.T) {
	id, secret := "ID", "SECRET"
	endpoint := "http://127.0.0.1:1"
	for _, tt := range []struct {
		env  map[string]string
		path string
		msg  string
	}{
		{map[string]string{"SECRET": "s3cr3t-value"}, "aws_access_key_id_env", "environment variable ID is not set"},
		{map[string]string{"ID": "AKID", "SECRET": "  "}, "aws_secret_access_key_env", "must not be blank"},
		{map[string]string{"ID": "AKID", "SECRET": " s3cr3t-value"}, "aws_secret_access_key_env", "surrounding whitespace"},
	} {
		_, err := NewClient(t.Context(), Settings{Name: "test sink", EndpointURL: &endpoint, CredentialMode: "environment",
			AccessKeyIDEnv: &id, SecretAccessKeyEnv: &secret},
			sink.Deps{Env: func(name string) (string, bool) { v, ok := tt.env[name]; return v, ok }})
		ce, ok := errors.AsType[*sink.ConfigError](err)
		if !ok || !errors.Is(err, sink.ErrConfig) {
			t.Fatalf("env %v: error %v, want a configuration error", tt.env, err)
		}
		if len(ce.Problems) != 1 || ce.Problems[0].Path != tt.path || !strings.Contains(ce.Problems[0].Message, tt.msg) {
			t.Errorf("env %v: problems %+v, want %s: …%s…", tt.env, ce.Problems, tt.path, tt.msg)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
}

// TestEndpointFromConfigurationOnly: AWS_ENDPOINT_URL in the environment
// does not redirect a client whose configuration names an endpoint.
func TestEndpointFromConfigurationOnly(t *testing.T) {
	srv, n := store(t, 200, "")
	elsewhere, other := store(t, 200, "")
	t.Setenv("AWS_ENDPOINT_URL", elsewhere.URL)
	t.Setenv("AWS_ENDPOINT_URL_S3", elsewhere.URL)
	if err := put(t.Context(), client(t, srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 || other.Load() != 0 {
		t.Errorf("requests: configured endpoint %d, AWS_ENDPOINT_URL %d; want 1, 0", n.Load(), other.Load())
	}
}
