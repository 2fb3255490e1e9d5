// Package engine is what a cairnq Client and its Workers run on: protocol
// v1's operations (submit with its key conflict strategies, reads, cancel,
// retry, purge, claim with lease recovery, heartbeats, settlement) written
// once over the statements of package protocol and two dialect backends:
// SQLite on github.com/ncruces/go-sqlite3 (one writer goroutine
// group-committing the writes that wait together, a pool of WAL readers)
// and Postgres over any executor.Executor (the database clock, SKIP LOCKED
// claims, LISTEN wakeups, grouped statements).
//
// The dialect is chosen once, by OpenSQLite or OpenPostgres; what a worker
// must do differently on each (SettleOnClaim, DatabaseClock) is asked of
// the Store, never of the dialect.
//
// A worker settles every attempt, of any task, with one Settlement
// through Store.Settle (settle.go), save the plain successes it groups
// (Completion, below); Settle reads from the claimed row
// whether the task is a workflow's step and then advances the workflow in
// the settlement's own transaction. Settlements are grouped here, with
// the machinery of package internal/group: the SQLite writer's group
// commit (sqlite_writer.go, sqlite_complete.go), the Postgres grouper
// (pggroup.go), and a worker's hand-over (handover.go, Completion and
// Pending), which package internal/completer fills and which rides on the
// worker's next claim (claim_settle.go) or is written in one statement of
// its own (SettleCompletions).
//
// A SubmitMany batch (submit_many.go) is one transaction that does what
// the same Submits would do one after another. On SQLite it is one
// request to the writer, each item through Submit's own statements. On
// Postgres it is a handful of statements whatever its size: lock_keys
// (every key's advisory lock, in one fixed order), get_by_keys (what
// each key points at), insert_many (every new task; from 256 of them,
// COPY where the session is an executor.Copier: submit_copy.go), cancel
// for each live task a replace supersedes, and upsert_keys (where each
// key points after the batch); which items write a task is decided in
// between, in Go, by Submit's own rule applied item after item.
//
// Beside the protocol's operations it holds what a worker's claim loop
// needs (Claims, with its LeaseLook, and the subscriptions of wakeups.go over
// package internal/wake), the console's read-only queries (console.go) and
// the health reads cairnq doctor shows (inspect.go). It is internal: users
// reach it through package cairnq, and tools through package store.
//
// Rows become values in one place (rows.go), whatever form the driver
// produced them in, so no adapter has to reconfigure its driver.
package engine
