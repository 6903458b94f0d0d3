package record

import "time"

// ParseTimeStamp parses a Nats-Time-Stamp header value (docs/formats.md#metadata-document, Q26):
// YYYY-MM-DD, optionally followed by 'T', 't' or ' ' and HH:MM[:SS[.F]]
// (F one or more digits, truncated to microseconds), then optionally 'Z' or
// ±hh:mm. No offset means UTC; a bare date is midnight UTC and takes no
// offset (Python's fromisoformat rejects "2026-05-29Z" too). Every other form
// — basic format, week or ordinal dates, ±hhmm or ±hh offsets, a ',' decimal
// mark, lower-case 'z' — is malformed. ok is false for malformed input.
func ParseTimeStamp(s string) (t time.Time, ok bool) {
	p := tsParser{s: s}
	year := p.digits(4)
	month := p.sepDigits('-', 2)
	day := p.sepDigits('-', 2)
	if !p.ok || year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return time.Time{}, false
	}
	var hour, minute, second, nanos, offset int
	if p.i < len(s) {
		switch s[p.i] {
		case 'T', 't', ' ':
			p.i++
		default:
			return time.Time{}, false
		}
		hour = p.digits(2)
		minute = p.sepDigits(':', 2)
		if p.ok && p.peek(':') {
			second = p.sepDigits(':', 2)
			if p.ok && p.peek('.') {
				p.i++
				nanos = p.fraction()
			}
		}
		if !p.ok || hour > 23 || minute > 59 || second > 59 {
			return time.Time{}, false
		}
		if p.i < len(s) {
			switch c := s[p.i]; c {
			case 'Z':
				p.i++
			case '+', '-':
				p.i++
				oh := p.digits(2)
				om := p.sepDigits(':', 2)
				if !p.ok || oh > 23 || om > 59 {
					return time.Time{}, false
				}
				offset = (oh*60 + om) * 60
				if c == '-' {
					offset = -offset
				}
			default:
				return time.Time{}, false
			}
		}
	}
	if p.i != len(s) {
		return time.Time{}, false
	}
	t = time.Date(year, time.Month(month), day, hour, minute, second, nanos, time.UTC)
	return t.Add(-time.Duration(offset) * time.Second), true
}

type tsParser struct {
	s  string
	i  int
	ok bool
}

// digits reads exactly n ASCII digits. It sets ok on the first call and
// keeps it false after any failure.
func (p *tsParser) digits(n int) int {
	if p.i == 0 {
		p.ok = true
	}
	if !p.ok || p.i+n > len(p.s) {
		p.ok = false
		return 0
	}
	v := 0
	for _, c := range []byte(p.s[p.i : p.i+n]) {
		if c < '0' || c > '9' {
			p.ok = false
			return 0
		}
		v = v*10 + int(c-'0')
	}
	p.i += n
	return v
}

func (p *tsParser) sepDigits(sep byte, n int) int {
	if !p.ok || !p.peek(sep) {
		p.ok = false
		return 0
	}
	p.i++
	return p.digits(n)
}

func (p *tsParser) peek(c byte) bool { return p.i < len(p.s) && p.s[p.i] == c }

// fraction reads one or more digits and returns them as nanoseconds
// truncated to microseconds.
func (p *tsParser) fraction() int {
	start, us := p.i, 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if p.i-start < 6 {
			us = us*10 + int(p.s[p.i]-'0')
		}
		p.i++
	}
	n := p.i - start
	if n == 0 {
		p.ok = false
		return 0
	}
	for ; n < 6; n++ {
		us *= 10
	}
	return us * 1000
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
