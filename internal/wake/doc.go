// Package wake wakes this process's waiting goroutines when a task may
// have changed: a Hub carries the in-process signals (a submit wakes idle
// workers, a settlement wakes waiters), and a Demand runs LISTEN on one
// Postgres channel, or watches a SQLite file, only while someone is
// subscribed, feeding what it hears into the Hub. Signals carry no state:
// a woken goroutine re-reads the database.
package wake
