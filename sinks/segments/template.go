package segments

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/sink"
)

// A template is a parsed partition template: levels of parts, each part a
// literal or a placeholder.
type template [][]part

type part struct {
	lit string // literal text when ph is 0
	ph  placeholder
}

type placeholder int

const (
	phStream placeholder = iota + 1
	phSubject
	phYear
	phMonth
	phDay
	phHour
)

var placeholders = map[string]placeholder{
	"stream": phStream, "subject": phSubject,
	"yyyy": phYear, "mm": phMonth, "dd": phDay, "hh": phHour,
}

const (
	maxLevels      = 16
	maxTemplateLen = 512
)

// parseTemplate parses a partition template; "" has no levels.
func parseTemplate(s string) (template, error) {
	if s == "" {
		return nil, nil
	}
	switch {
	case len(s) > maxTemplateLen:
		return nil, fmt.Errorf("must be at most %d characters", maxTemplateLen)
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/"):
		return nil, errors.New("must not start or end with \"/\"")
	case strings.Contains(s, "//"):
		return nil, errors.New("must not contain \"//\"")
	}
	levels := strings.Split(s, "/")
	if len(levels) > maxLevels {
		return nil, fmt.Errorf("has %d levels; at most %d are allowed", len(levels), maxLevels)
	}
	t := make(template, 0, len(levels))
	for _, lv := range levels {
		parts, err := parseLevel(lv)
		if err != nil {
			return nil, err
		}
		t = append(t, parts)
	}
	return t, nil
}

func parseLevel(lv string) ([]part, error) {
	if lv == "." || lv == ".." {
		return nil, fmt.Errorf("level %q is not allowed", lv)
	}
	var parts []part
	for lv != "" {
		open := strings.IndexByte(lv, '{')
		closing := strings.IndexByte(lv, '}')
		switch {
		case open < 0 && closing < 0:
			parts = append(parts, part{lit: lv})
			lv = ""
			continue
		case open < 0 || closing >= 0 && closing < open:
			return nil, errors.New("unbalanced brace")
		}
		end := strings.IndexByte(lv[open:], '}')
		if end < 0 {
			return nil, errors.New("unbalanced brace")
		}
		name := lv[open+1 : open+end]
		if strings.IndexByte(name, '{') >= 0 {
			return nil, errors.New("unbalanced brace")
		}
		ph, ok := placeholders[name]
		if !ok {
			return nil, fmt.Errorf("unknown placeholder %q", "{"+name+"}")
		}
		if open > 0 {
			parts = append(parts, part{lit: lv[:open]})
		}
		parts = append(parts, part{ph: ph})
		lv = lv[open+end+1:]
	}
	for _, p := range parts {
		for i := 0; i < len(p.lit); i++ {
			if !literalByte(p.lit[i]) {
				return nil, fmt.Errorf("character %q is not allowed; literal text is [A-Za-z0-9_.=-]", p.lit[i])
			}
		}
	}
	return parts, nil
}

func literalByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == '=' || c == '-'
}

// render returns the partition path of e ("" without levels); at is the
// partition time.
func (t template) render(e *sink.Envelope, at time.Time) string {
	if len(t) == 0 {
		return ""
	}
	at = at.UTC()
	b := make([]byte, 0, 64)
	for i, lv := range t {
		if i > 0 {
			b = append(b, '/')
		}
		for _, p := range lv {
			switch p.ph {
			case 0:
				b = append(b, p.lit...)
			case phStream:
				b = append(b, record.Safe(e.Stream, "stream")...)
			case phSubject:
				b = append(b, record.Safe(e.Subject, "subject")...)
			case phYear:
				b = appendPadded(b, at.Year(), 4)
			case phMonth:
				b = appendPadded(b, int(at.Month()), 2)
			case phDay:
				b = appendPadded(b, at.Day(), 2)
			case phHour:
				b = appendPadded(b, at.Hour(), 2)
			}
		}
	}
	return string(b)
}

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}
