// Package duckdbtest reads what the segments sink wrote with DuckDB, an
// independent reader: a lake that only the writing library can read back is
// not a lake. It is a module of its own because DuckDB's Go binding needs
// cgo, and the nats-sink module and its binary stay free of it.
package duckdbtest
