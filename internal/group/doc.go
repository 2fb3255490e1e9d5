// Package group runs requests that arrive together as one: a Grouper
// flushes what queued up while its last flush ran as one statement (one
// round trip, and for a write one commit). The engine's Postgres
// completions, inserts, durable step records and status reads group
// through it, and the SQLite
// writer gathers its group commits with the same Gather and decides the
// race between a caller giving up and its request starting with the same
// Ticket.
package group
