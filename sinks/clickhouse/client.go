package clickhouse

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-sinks/nats-sink/sink"
)

// client talks to one ClickHouse HTTP endpoint. It is safe for concurrent
// use.
type client struct {
	base      string // URL without query
	http      *http.Client
	auth      string // Authorization header value
	userAgent string
	gzip      bool
}

// maxErrorBody is how much of an error response is read: enough for the
// exception code, which leads the body.
const maxErrorBody = 64 << 10

// serverError is a failed request: a ClickHouse exception (code known) or
// an HTTP status without one. Its text names the operation, the code and
// the status, never the server's message: ClickHouse quotes the offending
// input there ("Cannot parse input: expected , before: …"), which may be
// payload.
type serverError struct {
	op     string // "insert into `db`.`t`"
	status int
	code   int // 0 = none found
	// unknownField is set for code 117 "Unknown field found" (the table
	// changed under the sink), which is not a row-content error.
	unknownField bool
	// inBody200 marks an exception in the body of a 200 answer.
	inBody200 bool
}

func (e *serverError) Error() string {
	var b strings.Builder
	b.WriteString("clickhouse ")
	b.WriteString(e.op)
	b.WriteString(": ")
	if e.code != 0 {
		b.WriteString("code ")
		b.WriteString(strconv.Itoa(e.code))
		if name := codeNames[e.code]; name != "" {
			b.WriteString(" " + name)
		}
		if e.unknownField {
			b.WriteString(" (unknown field)")
		}
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "(HTTP %d)", e.status)
	if e.inBody200 {
		b.WriteString(": exception after the status was sent")
	}
	return b.String()
}

// codeNames are ClickHouse's names of the exception codes the sink
// classifies, for error texts.
var codeNames = map[int]string{
	6: "CANNOT_PARSE_TEXT", 16: "NO_SUCH_COLUMN_IN_TABLE", 25: "CANNOT_PARSE_ESCAPE_SEQUENCE",
	26: "CANNOT_PARSE_QUOTED_STRING", 27: "CANNOT_PARSE_INPUT_ASSERTION_FAILED", 38: "CANNOT_PARSE_DATE",
	41: "CANNOT_PARSE_DATETIME", 44: "ILLEGAL_COLUMN", 47: "UNKNOWN_IDENTIFIER", 50: "UNKNOWN_TYPE",
	53: "TYPE_MISMATCH", 60: "UNKNOWN_TABLE", 62: "SYNTAX_ERROR", 69: "ARGUMENT_OUT_OF_BOUND",
	70: "CANNOT_CONVERT_TYPE", 72: "CANNOT_PARSE_NUMBER", 81: "UNKNOWN_DATABASE", 115: "UNKNOWN_SETTING",
	117: "INCORRECT_DATA", 131: "TOO_LARGE_STRING_SIZE", 159: "TIMEOUT_EXCEEDED", 164: "READONLY",
	192: "UNKNOWN_USER", 193: "WRONG_PASSWORD", 194: "REQUIRED_PASSWORD", 195: "IP_ADDRESS_NOT_ALLOWED",
	202: "TOO_MANY_SIMULTANEOUS_QUERIES", 209: "SOCKET_TIMEOUT", 210: "NETWORK_ERROR",
	241: "MEMORY_LIMIT_EXCEEDED", 242: "TABLE_IS_READ_ONLY", 243: "NOT_ENOUGH_SPACE", 252: "TOO_MANY_PARTS",
	285: "TOO_FEW_LIVE_REPLICAS", 286: "UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE", 291: "DATABASE_ACCESS_DENIED",
	319: "UNKNOWN_STATUS_OF_INSERT", 321: "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
	349: "CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN", 376: "CANNOT_PARSE_UUID", 394: "QUERY_WAS_CANCELLED",
	407: "DECIMAL_OVERFLOW", 467: "CANNOT_PARSE_BOOL", 469: "VIOLATED_CONSTRAINT", 497: "ACCESS_DENIED",
	516: "AUTHENTICATION_FAILED", 691: "UNKNOWN_ELEMENT_OF_ENUM", 999: "KEEPER_EXCEPTION",
}

// Exception classes.
type class int

const (
	classTemporary class = iota + 1
	classDestination
	classPermanent // row content: the INSERT's rows are bisected
)

func (c class) String() string {
	switch c {
	case classDestination:
		return "destination"
	case classPermanent:
		return "permanent"
	}
	return "temporary"
}

var (
	destinationCodes = codeSet(192, 193, 194, 195, 516, 164, 291, 497, 60, 81, 16, 47, 50, 62, 115)
	rowContentCodes  = codeSet(6, 25, 26, 27, 38, 41, 53, 69, 70, 72, 117, 131, 321, 349, 376, 407, 467, 469, 691)
)

func codeSet(codes ...int) map[int]bool {
	m := map[int]bool{}
	for _, c := range codes {
		m[c] = true
	}
	return m
}

// classify returns the class of a request error. The HTTP status alone is
// not trusted (18.x answers row-content errors with 500 as well as 400);
// the exception code decides.
func classify(err error) class {
	var se *serverError
	if errors.As(err, &se) {
		switch {
		case se.inBody200:
			return classTemporary
		case se.code == 117 && se.unknownField:
			return classDestination
		case destinationCodes[se.code]:
			return classDestination
		case rowContentCodes[se.code]:
			return classPermanent
		case se.code == 0 && (se.status == 401 || se.status == 403 || se.status == 404):
			return classDestination
		}
		return classTemporary
	}
	if certificateError(err) {
		return classDestination
	}
	return classTemporary
}

// certificateError reports whether err is a failed TLS certificate
// verification, which retrying does not fix.
func certificateError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// result turns an error of class cl into a sink.Result.
func result(cl class, err error) sink.Result {
	switch cl {
	case classDestination:
		return sink.Result{Outcome: sink.Destination, Err: err}
	case classPermanent:
		return sink.Result{Outcome: sink.Permanent, ErrorType: sink.PermanentSinkError, Err: err, Shared: true}
	}
	return sink.Result{Outcome: sink.Temporary, Err: err}
}

var leadingCode = regexp.MustCompile(`^\s*Code: ([0-9]{1,6})[.,]`)

// exceptionCode finds the exception code in the X-ClickHouse-Exception-Code
// header (newer servers), else in the body's leading "Code: <n>" (18.x:
// "Code: 60, e.displayText() = …"; newer: "Code: 60. DB::Exception: …").
func exceptionCode(h http.Header, body []byte) int {
	if v := h.Get("X-ClickHouse-Exception-Code"); v != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n
		}
	}
	if m := leadingCode.FindSubmatch(body); m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return 0
}

var userAgent = sync.OnceValue(func() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return "nats-sink/" + v
})

// do sends one POST with the given query parameters and body and returns
// the response body of a 200. Other answers are a *serverError.
func (c *client) do(ctx context.Context, op string, params url.Values, body []byte, contentType string, limit int64) ([]byte, error) {
	u := c.base
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	var rd io.Reader = bytes.NewReader(body)
	compressed := false
	if c.gzip && contentType == "application/x-ndjson" {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, 6)
		_, _ = zw.Write(body)
		_ = zw.Close()
		rd, compressed = bytes.NewReader(buf.Bytes()), true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, rd)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", op, err)
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", c.userAgent)
	if compressed {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", op, redactURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		se := &serverError{op: op, status: resp.StatusCode, code: exceptionCode(resp.Header, b)}
		se.unknownField = se.code == 117 && bytes.Contains(b, []byte("Unknown field found"))
		return nil, se
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: reading the response: %w", op, err)
	}
	if code := exceptionCode(resp.Header, b); code != 0 && (contentType == "application/x-ndjson" || bytes.HasPrefix(b, []byte("Code: "))) {
		// An exception after the status line (the server streamed the
		// 200 before it failed): the outcome is unknown.
		return nil, &serverError{op: op, status: resp.StatusCode, code: code, inBody200: true}
	}
	return b, nil
}

// redactURL drops the request URL (it holds the INSERT query, never
// credentials, but is long) from a transport error, keeping its cause.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// readSettings are sent with the sink's own reads.
func readParams() url.Values {
	return url.Values{"output_format_json_quote_64bit_integers": {"0"}, "wait_end_of_query": {"1"}}
}

// query runs a read and calls row for each line of its output.
func (c *client) query(ctx context.Context, op, sql string, row func(line []byte) error) error {
	b, err := c.do(ctx, op, readParams(), []byte(sql), "text/plain; charset=utf-8", 16<<20)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := row(sc.Bytes()); err != nil {
			return fmt.Errorf("clickhouse %s: %w", op, err)
		}
	}
	return sc.Err()
}

// exec runs a statement that returns nothing (DDL).
func (c *client) exec(ctx context.Context, op, sql string) error {
	_, err := c.do(ctx, op, url.Values{"wait_end_of_query": {"1"}}, []byte(sql), "text/plain; charset=utf-8", maxErrorBody)
	return err
}
