package oracle

import (
	"errors"
	"regexp"
	"strconv"

	"github.com/sijms/go-ora/v2/network"

	"github.com/nats-sinks/nats-sink/internal/sqlmodel"
	"github.com/nats-sinks/nats-sink/sink"
)

// oraUniqueViolation is ORA-00001, unique constraint violated.
const oraUniqueViolation = 1

type class int

const (
	classTemporary class = iota + 1
	classPermanent
	classDestination
)

// classifyCode maps an ORA error number to its class (docs/oracle.md, README
// Q6, Q11, Q22).
func classifyCode(mode sqlmodel.Mode, code int) class {
	switch code {
	case oraUniqueViolation:
		if mode == sqlmodel.InsertIgnore {
			// A concurrent writer inserted the key between the MERGE's
			// match and its insert (docs/migrating.md Q11): retry the batch.
			return classTemporary
		}
		return classPermanent
	case 1400, // cannot insert NULL
		1438,  // value larger than specified precision
		2290,  // check constraint violated
		12899, // value too large for column
		40441: // JSON syntax error
		return classPermanent
	case 1017, // invalid username/password
		942,   // table or view does not exist
		904,   // invalid identifier (missing column)
		1031,  // insufficient privileges
		28000, // account locked
		12154, // could not resolve the connect identifier
		12514: // listener does not know the service
		return classDestination
	}
	return classTemporary
}

var oraCode = regexp.MustCompile(`ORA-(\d{5})`)

// errorCode returns the ORA number of err: from go-ora's *network.OracleError
// anywhere in the chain, else from the first "ORA-NNNNN" in its text (errors
// the driver builds from a server refusal carry only the text).
func errorCode(err error) (int, bool) {
	if oe, ok := errors.AsType[*network.OracleError](err); ok {
		return oe.ErrCode, true
	}
	if m := oraCode.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, true
	}
	return 0, false
}

// classify wraps err with its class for the Writer (which passes Begin and
// Exec errors). Errors without an ORA number (network, timeouts, a broken
// connection) are Temporary. Duplicate-key errors are counted as conflicts.
func (s *Sink) classify(err error) error {
	if r := sink.Failed(err); r.Outcome != sink.Temporary {
		return err // already classified
	}
	code, ok := errorCode(err)
	if !ok {
		return err
	}
	if code == oraUniqueViolation {
		s.m.Conflicts.Add(1)
	}
	switch classifyCode(s.model.Mode, code) {
	case classPermanent:
		return sink.AsPermanent(err)
	case classDestination:
		return sink.AsDestination(err)
	}
	return err
}
