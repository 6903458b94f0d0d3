package segments

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

// Name patterns of final and open segments.
var (
	finalName = regexp.MustCompile(`^([0-9]{20})-([0-9]{20})-([0-9a-f]{16})\.(jsonl|jsonl\.gz|jsonl\.zst|parquet)$`)
	openName  = regexp.MustCompile(`^\.([0-9a-f]{16})\.(jsonl|jsonl\.gz|jsonl\.zst|parquet)\.open$`)
)

// IsFinalName reports whether name is a committed segment's file name.
func IsFinalName(name string) bool { return finalName.MatchString(name) }

// IsOpenName reports whether name is an open (unfinished) segment's name.
func IsOpenName(name string) bool { return openName.MatchString(name) }

// A Key identifies one record: its stream and stream sequence.
type Key struct {
	Stream   string
	Sequence uint64
}

// scanResult is what scanning a JSON Lines segment found.
type scanResult struct {
	valid   int64  // end offset of the last valid line or member before the first invalid one
	records int    // valid records before valid
	first   uint64 // smallest stream sequence among them
	last    uint64 // largest
	// bad describes the first invalid line or member; "" when the whole
	// file is valid.
	bad string
}

// scan reads a JSON Lines segment of the given compression ("none",
// "gzip", "zstd") from r and calls each (when non-nil) for every valid
// record, in file order. Only records of complete, valid lines (members,
// frames) before the first invalid one count.
func scan(r io.Reader, compression string, each func(Key)) (scanResult, error) {
	cr := &countingReader{br: bufio.NewReaderSize(r, 1<<16)}
	var res scanResult
	add := func(k Key) {
		if res.records == 0 || k.Sequence < res.first {
			res.first = k.Sequence
		}
		if res.records == 0 || k.Sequence > res.last {
			res.last = k.Sequence
		}
		res.records++
		if each != nil {
			each(k)
		}
	}
	switch compression {
	case "none":
		for {
			line, err := cr.br.ReadSlice('\n')
			for errors.Is(err, bufio.ErrBufferFull) {
				more, err2 := cr.br.ReadSlice('\n')
				line = append(bytes.Clone(line), more...)
				err = err2
			}
			if err == io.EOF {
				if len(line) > 0 {
					res.bad = fmt.Sprintf("offset %d: incomplete last line (%d bytes without a newline)", res.valid, len(line))
				}
				return res, nil
			}
			if err != nil {
				return res, err
			}
			k, ok := parseLine(line[:len(line)-1])
			if !ok {
				res.bad = fmt.Sprintf("offset %d: not a valid record line", res.valid)
				return res, nil
			}
			add(k)
			res.valid += int64(len(line))
		}
	case "gzip", "zstd":
		var zr *gzip.Reader
		var zd *zstd.Decoder
		if compression == "zstd" {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return res, err
			}
			defer d.Close()
			zd = d
		}
		for {
			if _, err := cr.br.Peek(1); err == io.EOF {
				return res, nil
			} else if err != nil {
				return res, err
			}
			var content []byte
			var err error
			if zd != nil {
				content, err = readFrame(cr, zd)
			} else {
				if zr == nil {
					zr, err = gzip.NewReader(cr)
				} else {
					err = zr.Reset(cr)
				}
				if err == nil {
					zr.Multistream(false)
					content, err = io.ReadAll(zr)
				}
			}
			if err != nil {
				if isIOError(err) {
					return res, err
				}
				res.bad = fmt.Sprintf("offset %d: invalid %s member: %v", res.valid, compression, err)
				return res, nil
			}
			var keys []Key
			for len(content) > 0 {
				nl := bytes.IndexByte(content, '\n')
				if nl < 0 {
					break
				}
				k, ok := parseLine(content[:nl])
				if !ok {
					break
				}
				keys = append(keys, k)
				content = content[nl+1:]
			}
			if len(content) > 0 || len(keys) == 0 {
				res.bad = fmt.Sprintf("offset %d: %s member holds an invalid line", res.valid, compression)
				return res, nil
			}
			for _, k := range keys {
				add(k)
			}
			res.valid = cr.n
		}
	}
	return res, fmt.Errorf("unknown compression %q", compression)
}

// ioError marks a read error of the underlying file, as opposed to invalid
// content.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

func isIOError(err error) bool {
	var ie *ioError
	return errors.As(err, &ie)
}

// parseLine reports the key of a valid record line: a strict-JSON object
// with a string stream and an integer stream_sequence.
func parseLine(line []byte) (Key, bool) {
	v, err := jsonx.Parse(line)
	if err != nil {
		return Key{}, false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Key{}, false
	}
	stream, ok := obj["stream"].(string)
	if !ok {
		return Key{}, false
	}
	seqv, ok := obj["stream_sequence"].(jsonx.Integer)
	if !ok {
		return Key{}, false
	}
	seq, err := strconv.ParseUint(string(seqv), 10, 64)
	if err != nil {
		return Key{}, false
	}
	return Key{Stream: stream, Sequence: seq}, true
}

// countingReader counts the bytes consumed from br. It is an io.ByteReader,
// so decompressors read exactly the bytes of one member and no further.
type countingReader struct {
	br *bufio.Reader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		err = &ioError{err}
	}
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	} else if err != io.EOF {
		err = &ioError{err}
	}
	return b, err
}

var errTruncatedFrame = errors.New("truncated frame")

// readFrame reads one complete zstd frame from cr, following its block
// headers to find its end, and decodes it (checking the content checksum,
// which the sink always writes).
func readFrame(cr *countingReader, zd *zstd.Decoder) ([]byte, error) {
	var frame []byte
	take := func(n int) ([]byte, error) {
		start := len(frame)
		for range n {
			b, err := cr.ReadByte()
			if err == io.EOF {
				return nil, errTruncatedFrame
			}
			if err != nil {
				return nil, err
			}
			frame = append(frame, b)
		}
		return frame[start:], nil
	}
	hdr, err := take(5)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(hdr) != 0xFD2FB528 {
		return nil, errors.New("not a zstd frame")
	}
	fhd := hdr[4]
	fcsFlag := fhd >> 6
	single := fhd&0x20 != 0
	checksum := fhd&0x04 != 0
	if !checksum {
		return nil, errors.New("frame has no content checksum")
	}
	n := 0
	if !single {
		n++ // window descriptor
	}
	n += [4]int{0, 1, 2, 4}[fhd&0x03]
	n += [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		n++
	}
	if _, err := take(n); err != nil {
		return nil, err
	}
	for {
		bh, err := take(3)
		if err != nil {
			return nil, err
		}
		v := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
		last := v&1 != 0
		size := int(v >> 3)
		switch (v >> 1) & 3 {
		case 1: // RLE: one byte
			size = 1
		case 3:
			return nil, errors.New("reserved block type")
		}
		if size > 1<<17 {
			return nil, errors.New("block too large")
		}
		if _, err := take(size); err != nil {
			return nil, err
		}
		if last {
			break
		}
	}
	if _, err := take(4); err != nil {
		return nil, err
	}
	return zd.DecodeAll(frame, nil)
}
