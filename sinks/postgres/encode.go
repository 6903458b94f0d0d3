package postgres

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
)

// Element type OIDs of the unnest arrays.
const (
	textOID = 25
	int8OID = 20
)

// encodedSize returns the bytes the values of rows take in PostgreSQL's
// binary formats, each with its 4-byte length.
func encodedSize(rows []*sqlmodel.Row) int {
	size := 0
	for _, r := range rows {
		for f := range sqlmodel.NumFields {
			size += 4
			switch v := r.Values[f].(type) {
			case int64:
				size += 8
			case string:
				size += len(v)
			}
		}
	}
	return size
}

// appendValue appends one value in binary format with its length: text
// as its bytes, bigint as 8 bytes, nil as length -1 (SQL NULL).
func appendValue(buf []byte, v any) []byte {
	switch v := v.(type) {
	case int64:
		buf = binary.BigEndian.AppendUint32(buf, 8)
		return binary.BigEndian.AppendUint64(buf, uint64(v))
	case string:
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
		return append(buf, v...)
	default:
		return binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
	}
}

// encodeArrays returns the 16 parameters of the unnest statement in
// PostgreSQL's binary array format (array_recv): one one-dimensional
// array per column, text or bigint, NULL elements for nil values, all in
// one allocation. pgx's own encoding of []*string arrays reflects on
// every element and grows its buffer by appending (about 20 ms of CPU per
// 1000 rows, more than building the rows); this is a single pass
// (about 3 ms).
func encodeArrays(rows []*sqlmodel.Row) [][]byte {
	const header = 20 // ndim, has-null flag, element type, length, lower bound
	buf := make([]byte, 0, int(sqlmodel.NumFields)*header+encodedSize(rows))
	params := make([][]byte, sqlmodel.NumFields)
	for f := range sqlmodel.NumFields {
		start := len(buf)
		elem := uint32(textOID)
		if f.Integer() {
			elem = int8OID
		}
		buf = binary.BigEndian.AppendUint32(buf, 1)
		buf = binary.BigEndian.AppendUint32(buf, 0) // has-null flag, set below
		buf = binary.BigEndian.AppendUint32(buf, elem)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(rows)))
		buf = binary.BigEndian.AppendUint32(buf, 1)
		for _, r := range rows {
			if r.Values[f] == nil {
				binary.BigEndian.PutUint32(buf[start+4:], 1)
			}
			buf = appendValue(buf, r.Values[f])
		}
		params[f] = buf[start:len(buf):len(buf)]
	}
	return params
}

// copySignature starts every binary COPY stream.
const copySignature = "PGCOPY\n\xff\r\n\x00"

// encodeCopy returns rows as one binary COPY stream for the COPY path's
// temporary table, whose columns are text and bigint in table order: the
// signature, flags and header extension length, then per row the field
// count and each value, then the -1 trailer. Writing the stream here
// avoids pgx's CopyFrom, which asks the server for the column types first
// (one more round trip per batch) and encodes each value through its type
// map.
func encodeCopy(rows []*sqlmodel.Row) []byte {
	buf := make([]byte, 0, len(copySignature)+8+len(rows)*2+encodedSize(rows)+2)
	buf = append(buf, copySignature...)
	buf = binary.BigEndian.AppendUint32(buf, 0) // flags: no OIDs
	buf = binary.BigEndian.AppendUint32(buf, 0) // header extension length
	for _, r := range rows {
		buf = binary.BigEndian.AppendUint16(buf, uint16(sqlmodel.NumFields))
		for f := range sqlmodel.NumFields {
			buf = appendValue(buf, r.Values[f])
		}
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16) // -1: end of data
}

// Element type OIDs of the mapped layout's arrays (see encodeMapped).
var elemOID = map[sqlmodel.ArrayElem]uint32{
	sqlmodel.ElemText: textOID, sqlmodel.ElemInt8: int8OID, sqlmodel.ElemFloat8: 701,
	sqlmodel.ElemBool: 16, sqlmodel.ElemTimestamptz: 1184, sqlmodel.ElemBytea: 17,
}

// pgEpochMicros is 2000-01-01T00:00:00Z in µs since 1970, the origin of
// PostgreSQL's binary timestamps.
const pgEpochMicros = 946684800 * 1000000

// encodeMapped returns the parameters of a mapped table's multi-row
// statement: one binary one-dimensional array per column, of element type
// elems[i], NULL elements for nil values, in one allocation. ok is false
// when a value does not have the Go type its column's element binds (the
// caller then writes the rows one statement each, which binds anything the
// driver can).
func encodeMapped(rows []*sqlmodel.Row, elems []sqlmodel.ArrayElem) (params [][]byte, ok bool) {
	const header = 20 // ndim, has-null flag, element type, length, lower bound
	size := len(elems) * header
	for _, r := range rows {
		for _, v := range r.M {
			size += 4
			switch v := v.(type) {
			case string:
				size += len(v)
			case []byte:
				size += len(v)
			default:
				size += 8
			}
		}
	}
	buf := make([]byte, 0, size)
	params = make([][]byte, len(elems))
	for i, elem := range elems {
		start := len(buf)
		buf = binary.BigEndian.AppendUint32(buf, 1)
		buf = binary.BigEndian.AppendUint32(buf, 0) // has-null flag, set below
		buf = binary.BigEndian.AppendUint32(buf, elemOID[elem])
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(rows)))
		buf = binary.BigEndian.AppendUint32(buf, 1)
		for _, r := range rows {
			if i >= len(r.M) {
				return nil, false
			}
			v := r.M[i]
			if v == nil {
				binary.BigEndian.PutUint32(buf[start+4:], 1)
				buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
				continue
			}
			switch x := v.(type) {
			case string:
				if elem != sqlmodel.ElemText {
					return nil, false
				}
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(x)))
				buf = append(buf, x...)
			case []byte:
				if elem != sqlmodel.ElemBytea {
					return nil, false
				}
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(x)))
				buf = append(buf, x...)
			case int64:
				if elem != sqlmodel.ElemInt8 {
					return nil, false
				}
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, uint64(x))
			case float64:
				if elem != sqlmodel.ElemFloat8 {
					return nil, false
				}
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(x))
			case bool:
				if elem != sqlmodel.ElemBool {
					return nil, false
				}
				buf = binary.BigEndian.AppendUint32(buf, 1)
				b := byte(0)
				if x {
					b = 1
				}
				buf = append(buf, b)
			case time.Time:
				if elem != sqlmodel.ElemTimestamptz {
					return nil, false
				}
				// Unix() floors, Nanosecond() is never negative: µs
				// truncated toward the past, as the conversion does.
				us := x.Unix()*1000000 + int64(x.Nanosecond()/1000) - pgEpochMicros
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, uint64(us))
			default:
				return nil, false
			}
		}
		params[i] = buf[start:len(buf):len(buf)]
	}
	return params, true
}
