// Package jsonxtest holds test helpers for code that writes JSON with
// jsonx: checks written independently of jsonx.
package jsonxtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// JSONBOrdered returns an error naming the first object in data whose keys
// are not strictly ascending by (UTF-8 byte length, bytes), PostgreSQL
// jsonb's order. It is written independently of jsonx, on encoding/json's
// tokenizer, so that tests of jsonx.JSONBOrder do not check the encoder with
// itself.
func JSONBOrdered(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object  bool
		wantKey bool
		last    *string
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		top := len(stack) - 1
		switch tok {
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			continue
		}
		if top >= 0 && stack[top].object {
			if stack[top].wantKey {
				k := tok.(string)
				if last := stack[top].last; last != nil && (len(*last) > len(k) || len(*last) == len(k) && *last >= k) {
					return errors.New("key " + strconv.Quote(k) + " follows " + strconv.Quote(*last))
				}
				stack[top].last, stack[top].wantKey = &k, false
				continue
			}
			stack[top].wantKey = true // tok is the member's value, or starts it
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		}
	}
}
