// Package store runs cairnq protocol v1's operations (submit with its key
// conflict strategies, reads, cancel, retry, purge, claim with lease
// recovery, heartbeats, settlement) written once over the statements of
// package protocol and two dialect backends: SQLite on
// github.com/ncruces/go-sqlite3 (one writer goroutine group-committing the
// writes that wait together, a pool of WAL readers) and Postgres over any
// executor.Executor (the database clock, SKIP LOCKED claims, LISTEN
// wakeups, grouped completions).
//
// A Store's exported methods are the protocol's operations and read-only
// reads for operators (inspect.go: InspectSQLite, InspectPostgres and the
// health reads cairnq doctor shows); what only a cairnq Client or Worker
// needs (the worker's claim planning, in-process wakeups) stays unexported
// and reaches the root package through internal/
//
// It also holds the types every floor shares: Task, its statuses, the
// error envelope and the errors (sentinels for errors.Is, typed errors
// carrying a task id, key or envelope for errors.As). The root package
// re-exports them; most programs use that, not this package.
//
// Rows become values in one place (rows.go), whatever form the driver
// produced them in, so no adapter has to reconfigure its driver.
package engine
