// Package cairnqtype holds the values every floor of cairnq shares: a
// Task and its Status, the ErrorEnvelope a failure is stored as, the
// error types and sentinels, the limits every backend enforces alike, and
// the option structs of the protocol's operations.
//
// It imports nothing of cairnq but a hook for errors.As (internal/errlink),
// so that the engine, package store and the root package can all use it, as River's rivertype is used. Programs
// usually name these values through package cairnq, which declares its
// own types of the same names and fields; errors.As matches a typed
// error under either name.
package cairnqtype
