// Package store is cairnq protocol v1 one call at a time: each method of a
// Store is one operation of the protocol (submit, read, cancel, retry,
// purge, claim, heartbeat, progress, complete, fail, snooze), run on the
// database of a cairnq Client exactly as the Client's own workers run it.
//
// It is for tools and certification: a program that speaks the protocol
// without a Worker (an operator's script, another SDK's test harness, the
// conformance suite), or that must act as a given worker id. Applications
// use package cairnq, whose Client and Worker add what the protocol leaves
// to an SDK: waiting, retries and backoff, middleware, the scheduler.
//
// A Store comes from Client.Store and lives as long as its Client. The
// values it takes and returns (Task, Status, ErrorEnvelope, the errors and
// the option structs) are those of package cairnqtype; package cairnq
// declares its own of the same names and fields, and errors.As matches
// a typed error under either name.
package store
