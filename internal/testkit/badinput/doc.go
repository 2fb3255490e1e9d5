// Package badinput is the one table of bad input every backend must refuse
// alike, and its runner. The root package runs it on SQLite
// (badinput_test.go), conformance/ on Postgres through the pgx adapter.
//
// Each row is one call on the public API with one bad (or, for the
// positive controls, just acceptable) value. A refused call must fail with
// an error that satisfies errors.Is(err, cairnq.ErrInvalidArgument) and is
// the typed error the row names, and it must write nothing: the tasks
// listed before and after the call are the same. An accepted call must
// write exactly the tasks it says, and a payload must read back as
// submitted.
//
// It is test support only: nothing outside tests imports it.
package badinput
