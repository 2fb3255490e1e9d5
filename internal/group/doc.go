// Package group runs requests that arrive together as one: a Grouper
// flushes what queued up while its last flush ran as one statement (one
// round trip, and for a write one commit), and the SQLite writer gathers
// its group commits with the same Gather, SettleArrivals and Ticket. The
// engine's Postgres completions, inserts and status reads group here.
package group
