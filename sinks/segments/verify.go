package segments

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A Report is what Verify found in a segment directory.
type Report struct {
	Segments   int // final segments
	Open       int // open (unfinished) segments, not read as records
	Torn       int // open JSON Lines segments that recovery would cut
	Unreadable int // final segments that failed a check
	// UnreadableFiles lists each unreadable final segment, relative to the
	// directory, with the reason.
	UnreadableFiles []UnreadableFile
	Records         int64 // records in readable final segments
	Distinct        int64 // distinct (stream, stream sequence)
	Duplicates      int64 // Records - Distinct
	Streams         []StreamReport
}

// UnreadableFile is one final segment that failed verification.
type UnreadableFile struct {
	Path   string
	Reason string
}

// StreamReport summarises one stream's records.
type StreamReport struct {
	Name     string
	Min, Max uint64
	// Missing counts the sequences absent in [Min, Max], or in the expected
	// range when one was given for this stream.
	Missing uint64
}

// An Expect is a range of stream sequences that must all be present.
type Expect struct {
	Stream      string
	First, Last uint64
}

// ParseExpect parses STREAM:FIRST-LAST.
func ParseExpect(s string) (Expect, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return Expect{}, fmt.Errorf("expect %q: want STREAM:FIRST-LAST", s)
	}
	a, b, ok := strings.Cut(s[i+1:], "-")
	first, err1 := strconv.ParseUint(a, 10, 64)
	last, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first {
		return Expect{}, fmt.Errorf("expect %q: want STREAM:FIRST-LAST with 1 <= FIRST <= LAST", s)
	}
	return Expect{Stream: s[:i], First: first, Last: last}, nil
}

// ErrNotDirectory is returned by Verify when dir is not a directory.
var ErrNotDirectory = errors.New("not a directory")

// Verify reads every segment below dir completely and counts records,
// distinct keys and duplicates; it changes nothing. Files that are neither
// final nor open segments are ignored. An error means dir could not be
// walked; problems with single files are in the report.
func Verify(dir string, expects []Expect) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotDirectory)
	}
	rep := &Report{}
	seen := map[string]*seqSet{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		name := d.Name()
		switch {
		case IsOpenName(name):
			rep.Open++
			m := openName.FindStringSubmatch(name)
			if m[2] == "parquet" {
				return nil
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			res, err := scan(f, compressionOfExt(m[2]), nil)
			if err != nil || res.bad != "" {
				rep.Torn++
			}
		case IsFinalName(name):
			rep.Segments++
			keys, reason := readFinal(path, name)
			if reason != "" {
				rep.Unreadable++
				rep.UnreadableFiles = append(rep.UnreadableFiles, UnreadableFile{Path: filepath.ToSlash(rel), Reason: reason})
				return nil
			}
			for _, k := range keys {
				rep.Records++
				set := seen[k.Stream]
				if set == nil {
					set = newSeqSet()
					seen[k.Stream] = set
				}
				set.add(k.Sequence)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ranges := map[string]Expect{}
	for _, e := range expects {
		ranges[e.Stream] = e
		if seen[e.Stream] == nil {
			seen[e.Stream] = newSeqSet()
		}
	}
	for name, set := range seen {
		rep.Distinct += set.n
		sr := StreamReport{Name: name, Min: set.min, Max: set.max}
		if e, ok := ranges[name]; ok {
			sr.Missing = e.Last - e.First + 1 - set.countIn(e.First, e.Last)
		} else if set.n > 0 {
			sr.Missing = set.max - set.min + 1 - uint64(set.n)
		}
		rep.Streams = append(rep.Streams, sr)
	}
	slices.SortFunc(rep.Streams, func(a, b StreamReport) int { return strings.Compare(a.Name, b.Name) })
	rep.Duplicates = rep.Records - rep.Distinct
	return rep, nil
}

// readFinal reads a final segment and checks it against its name; reason
// is "" when it is readable.
func readFinal(path, name string) ([]Key, string) {
	m := finalName.FindStringSubmatch(name)
	if m[4] == "parquet" {
		return readParquet(path, m[1], m[2])
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err.Error()
	}
	defer f.Close()
	var keys []Key
	res, err := scan(f, compressionOfExt(m[4]), func(k Key) { keys = append(keys, k) })
	switch {
	case err != nil:
		return nil, err.Error()
	case res.bad != "":
		return nil, res.bad
	case res.records == 0:
		return nil, "no records"
	}
	first, _ := strconv.ParseUint(m[1], 10, 64)
	last, _ := strconv.ParseUint(m[2], 10, 64)
	if first != res.first || last != res.last {
		return nil, fmt.Sprintf("name says sequences %d-%d, records hold %d-%d", first, last, res.first, res.last)
	}
	return keys, ""
}

// seqSet is a set of stream sequences, as a bitmap in chunks of 65,536:
// compact for the dense runs a stream has.
type seqSet struct {
	chunks   map[uint64]*[1024]uint64
	n        int64
	min, max uint64
}

func newSeqSet() *seqSet { return &seqSet{chunks: map[uint64]*[1024]uint64{}} }

func (s *seqSet) add(seq uint64) {
	c := s.chunks[seq>>16]
	if c == nil {
		c = new([1024]uint64)
		s.chunks[seq>>16] = c
	}
	w, b := (seq&0xffff)>>6, seq&63
	if c[w]&(1<<b) != 0 {
		return
	}
	c[w] |= 1 << b
	if s.n == 0 || seq < s.min {
		s.min = seq
	}
	if s.n == 0 || seq > s.max {
		s.max = seq
	}
	s.n++
}

func (s *seqSet) has(seq uint64) bool {
	c := s.chunks[seq>>16]
	return c != nil && c[(seq&0xffff)>>6]&(1<<(seq&63)) != 0
}

// countIn counts the members in [first, last].
func (s *seqSet) countIn(first, last uint64) uint64 {
	var n uint64
	for seq := first; seq <= last; {
		if seq&63 == 0 && last-seq >= 63 {
			c := s.chunks[seq>>16]
			if c != nil {
				n += uint64(bits.OnesCount64(c[(seq&0xffff)>>6]))
			}
			seq += 64
			continue
		}
		if s.has(seq) {
			n++
		}
		if seq == last {
			break
		}
		seq++
	}
	return n
}
