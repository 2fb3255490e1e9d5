// Package pgserver provisions the real PostgreSQL server that executor
// certification (package conformance) and cairnq's own tests run against:
// one server per test binary, a fresh database per test.
package pgserver

import (
	"testing"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// DSN returns the DSN of a fresh, empty database on a real
// PostgreSQL server, dropped when t ends. The server is found or started
// once per test binary, by the first of these paths that works:
//
//  1. CAIRNQ_TEST_PG_DSN names a server (its role must be allowed to create
//     databases);
//  2. Docker, when the test binary imports
//     github.com/cairnq/cairnq-go/conformance/pgdocker (a module of its own,
//     so testcontainers reaches only the binaries that ask for it) and an
//     engine answers: a container of CAIRNQ_PG_IMAGE, default
//     postgres:15-alpine, removed when the tests end;
//  3. a throwaway cluster from the local initdb and postgres binaries
//     (PostgreSQL 15 or later on PATH or under /usr/lib/postgresql).
//
// With none t is skipped, unless CAIRNQ_REQUIRE_PG=1, which makes it a
// failure so CI cannot pass by skipping. A package that calls it routes
// its TestMain through [Main] so a server started for it is
// stopped.
func DSN(t testing.TB) string {
	t.Helper()
	return pgtest.DSN(t)
}

// Main runs the tests of m, stops the PostgreSQL server
// [DSN] started (if it started one: a local cluster, or a container
// it removes) and exits with the tests' exit code. Call it from the
// TestMain of a package that certifies an executor; an adapter author who
// wants the Docker path imports conformance/pgdocker beside it:
//
//	import _ "github.com/cairnq/cairnq-go/conformance/pgdocker" // optional: Docker first
//
//	func TestMain(m *testing.M) { pgserver.Main(m) }
func Main(m *testing.M) { pgtest.Main(m) }
