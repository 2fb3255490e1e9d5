// Package adaptertest holds the test logic that the Postgres adapters
// (gorm, bun, pgx, lib/pq) would otherwise each carry a copy of: small
// helpers for sessions, polling and notifications, and whole tests that
// hold for every adapter, parameterised by an [Adapter] that opens one.
//
// It is imported by the adapters' _test.go files only. What it checks is
// the behaviour the adapters promise alike; what belongs to one driver or
// ORM (its typed transaction helpers, its own LISTEN route, its error
// types) stays in that adapter's tests, which call in here for the rest.
// Unlike the public conformance suite, it may use internal packages and
// drive an adapter through its test-only hooks.
package adaptertest
