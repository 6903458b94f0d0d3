package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/sink"
)

// Escaping says how a template inserts subject, stream and token values.
type Escaping int

const (
	// Raw inserts values unchanged: Redis keys and AMQP routing keys take
	// any bytes, and NATS tokens are already topic-exchange words.
	Raw Escaping = iota + 1
	// Topic escapes each value as one MQTT topic level (EscapeLevel) and
	// turns {subject}'s "." separators into "/".
	Topic
)

// A Template renders a destination name (Redis stream key, AMQP routing
// key, MQTT topic) from a message: literal text plus {subject}, {stream}
// and {token:N}, the N-th "."-separated subject token (N = 1..32).
type Template struct {
	parts []part
	esc   Escaping
}

type partKind int

const (
	literal partKind = iota + 1
	subjectValue
	streamValue
	tokenValue
)

type part struct {
	kind partKind
	lit  string // literal
	n    int    // tokenValue: 1-based token index
}

// ParseTemplate parses s. An unknown placeholder or a stray "{" or "}" is an
// error (a configuration problem of the key holding s). For MQTT topics
// (Topic), literal text must not contain the wildcards "+" and "#" or
// control characters, and must not start with "$" (the brokers reserve such
// topics).
func ParseTemplate(s string, esc Escaping) (Template, error) {
	t := Template{esc: esc}
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		closing := strings.IndexByte(rest, '}')
		if closing >= 0 && (open < 0 || closing < open) {
			return Template{}, errors.New(`stray "}": write placeholders as {subject}, {stream} or {token:N}`)
		}
		if open < 0 {
			t.parts = append(t.parts, part{kind: literal, lit: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, part{kind: literal, lit: rest[:open]})
		}
		if closing < 0 {
			return Template{}, errors.New(`unclosed "{": write placeholders as {subject}, {stream} or {token:N}`)
		}
		name := rest[open+1 : closing]
		switch {
		case name == "subject":
			t.parts = append(t.parts, part{kind: subjectValue})
		case name == "stream":
			t.parts = append(t.parts, part{kind: streamValue})
		case strings.HasPrefix(name, "token:"):
			digits := strings.TrimPrefix(name, "token:")
			n, err := strconv.Atoi(digits)
			if err != nil || n < 1 || n > 32 || digits != strconv.Itoa(n) {
				return Template{}, fmt.Errorf("placeholder {%s}: N must be an integer from 1 to 32", name)
			}
			t.parts = append(t.parts, part{kind: tokenValue, n: n})
		default:
			return Template{}, fmt.Errorf("unknown placeholder {%s}: use {subject}, {stream} or {token:N}", name)
		}
		rest = rest[closing+1:]
	}
	if esc == Topic {
		for i, p := range t.parts {
			if p.kind != literal {
				continue
			}
			switch {
			case strings.ContainsAny(p.lit, "+#"):
				return Template{}, errors.New(`literal text must not contain the MQTT wildcards "+" or "#"`)
			case strings.ContainsFunc(p.lit, func(r rune) bool { return r < 0x20 || r == 0x7f }):
				return Template{}, errors.New("literal text must not contain control characters")
			case i == 0 && strings.HasPrefix(p.lit, "$"):
				return Template{}, errors.New(`must not start with "$" (topics starting with "$" are reserved by the broker)`)
			}
		}
	}
	return t, nil
}

// Literal reports whether the template has no placeholder; its text is then
// the same for every message.
func (t Template) Literal() (string, bool) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.kind != literal {
			return "", false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

// Render returns the destination name of e. A {token:N} past the subject's
// last token, or {stream} for a message without a stream, is a Permanent
// ValidationError: that message can never be routed.
func (t Template) Render(e *sink.Envelope) (string, error) {
	var b strings.Builder
	var tokens []string
	for _, p := range t.parts {
		switch p.kind {
		case literal:
			b.WriteString(p.lit)
		case subjectValue:
			if t.esc == Topic {
				for i, tok := range strings.Split(e.Subject, ".") {
					if i > 0 {
						b.WriteByte('/')
					}
					appendLevel(&b, tok)
				}
			} else {
				b.WriteString(e.Subject)
			}
		case streamValue:
			if e.Stream == "" {
				return "", sink.AsPermanentType(sink.ValidationError,
					fmt.Errorf("subject %q has no stream for {stream}", e.Subject))
			}
			t.value(&b, e.Stream)
		case tokenValue:
			if tokens == nil {
				tokens = strings.Split(e.Subject, ".")
			}
			if p.n > len(tokens) {
				return "", sink.AsPermanentType(sink.ValidationError,
					fmt.Errorf("subject %q has no token %d", e.Subject, p.n))
			}
			t.value(&b, tokens[p.n-1])
		}
	}
	out := b.String()
	if t.esc == Topic && strings.HasPrefix(out, "$") {
		// Only a value can put "$" first (literals may not start with it).
		out = "%24" + out[1:]
	}
	return out, nil
}

func (t Template) value(b *strings.Builder, v string) {
	if t.esc == Topic {
		appendLevel(b, v)
		return
	}
	b.WriteString(v)
}

// EscapeLevel returns v as one MQTT topic level: "%", "/", "+", "#" and the
// control characters U+0000-U+001F and U+007F become %XX (upper-case hex), so
// no NATS token can split a level, act as a wildcard or hide a character.
// UnescapeTopic reverses it.
func EscapeLevel(v string) string {
	var b strings.Builder
	appendLevel(&b, v)
	return b.String()
}

func appendLevel(b *strings.Builder, v string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '%' || c == '/' || c == '+' || c == '#' || c < 0x20 || c == 0x7f:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
}

// UnescapeTopic turns an MQTT topic rendered from {subject} back into the
// NATS subject: split on "/", percent-decode each level, join with ".".
func UnescapeTopic(topic string) (string, error) {
	levels := strings.Split(topic, "/")
	for i, l := range levels {
		var b strings.Builder
		for j := 0; j < len(l); j++ {
			if l[j] != '%' {
				b.WriteByte(l[j])
				continue
			}
			if j+2 >= len(l) {
				return "", fmt.Errorf("topic level %q: truncated escape", l)
			}
			n, err := strconv.ParseUint(l[j+1:j+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("topic level %q: bad escape", l)
			}
			b.WriteByte(byte(n))
			j += 2
		}
		levels[i] = b.String()
	}
	return strings.Join(levels, "."), nil
}
