package mysql

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

// Server error codes used by the classification (docs/sql.md#per-database).
const (
	errDupEntry = 1062
)

type class int

const (
	classTemporary class = iota + 1
	classPermanent
	classDestination
)

// classifyCode maps a MySQL/MariaDB error number to its class
// (docs/sql.md#per-database). Codes marked [ext] are not in the spec's lists; they are the same
// kind of failure as their neighbours.
func classifyCode(mode sqlmodel.Mode, code uint16) class {
	switch code {
	case errDupEntry:
		if mode == sqlmodel.InsertIgnore {
			// A concurrent writer inserted the key between the ignore
			// check and the insert (docs/migrating.md Q11): retry the batch.
			return classTemporary
		}
		return classPermanent
	case 1048, // column cannot be null
		1366, // incorrect value (e.g. invalid string for the character set)
		1406, // data too long for column
		1264, // [ext] out of range value for column (a narrower column than the mapping declares)
		3140, // invalid JSON text (MySQL)
		3819, // check constraint violated (MySQL)
		4025, // CONSTRAINT failed (MariaDB CHECK, json_valid)
		1153: // [ext] statement larger than max_allowed_packet: only a single oversized row gets here
		return classPermanent
	case 1045, // access denied (authentication)
		1049, // unknown database
		1054, // unknown column
		1064, // SQL syntax (a table or column the server rejects)
		1142, // table command denied
		1146, // table doesn't exist
		1044, // [ext] access denied to database
		1143, // [ext] column command denied
		1698, // [ext] access denied (no password accepted for this account)
		3118, // [ext] account locked (MySQL)
		4151: // [ext] account locked (MariaDB)
		return classDestination
	}
	return classTemporary // 2003, 2006, 2013, 1205, 1213, …
}

// classify wraps err with its class for the Writer (which passes Begin and
// Exec errors): a driver refusal to send an oversized statement is
// Permanent (the runner's bisection isolates the row), server errors go by
// code, and anything else (network, timeouts) is Temporary. Duplicate-key
// errors are counted as conflicts.
func (s *Sink) classify(err error) error {
	if r := sink.Failed(err); r.Outcome != sink.Temporary {
		return err // already classified (insert_ignore warnings)
	}
	if errors.Is(err, mysql.ErrPktTooLarge) {
		return sink.AsPermanent(err)
	}
	me, ok := errors.AsType[*mysql.MySQLError](err)
	if !ok {
		return err
	}
	if me.Number == errDupEntry {
		s.m.Conflicts.Add(1)
	}
	switch classifyCode(s.model.Mode, me.Number) {
	case classPermanent:
		return sink.AsPermanent(err)
	case classDestination:
		return sink.AsDestination(err)
	}
	return err
}

// sanitize keeps server messages free of message content (docs/library.md#the-sink-boundary):
// a duplicate-key message quotes the key values (a message id is a header
// value) and an incorrect-value message quotes the offending bytes. The
// quoted value is replaced by '…'; the error number, the key or column name
// and the row number are kept.
func sanitize(err error) error {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	if !ok {
		return err
	}
	switch me.Number {
	case errDupEntry, 1264, 1292, 1366, 1367:
	default:
		return err
	}
	clean := *me
	clean.Message = redactQuoted(me.Message)
	return &clean
}

// redactQuoted replaces the text from the first single quote to the last
// "' for " (values are not escaped in these messages, so they may contain
// quotes themselves) with '…'. Without that shape the whole message goes.
func redactQuoted(msg string) string {
	open := strings.IndexByte(msg, '\'')
	end := strings.LastIndex(msg, "' for ")
	if open < 0 || end <= open {
		return "(message withheld: it may quote message content)"
	}
	return msg[:open] + "'…" + msg[end:]
}
