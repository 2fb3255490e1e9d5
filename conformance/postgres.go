package conformance

import (
	"testing"

	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// PostgresDSN returns the DSN of a fresh, empty database on a real
// PostgreSQL server, dropped when t ends. The server is found or started
// once per test binary: the server named by CAIRNQ_TEST_PG_DSN (its role
// must be allowed to create databases); else a throwaway cluster from the
// local initdb and postgres binaries. With neither t is skipped, unless
// CAIRNQ_REQUIRE_PG=1, which makes it a failure so CI cannot pass by
// skipping. A package that calls it should route its TestMain through
// [PostgresMain] so a server started for it is stopped.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return pgtest.DSN(t)
}

// PostgresMain runs the tests of m, stops the PostgreSQL server
// [PostgresDSN] started (if it started one) and exits with the tests' exit
// code. Call it from the TestMain of a package that certifies an executor:
//
//	func TestMain(m *testing.M) { conformance.PostgresMain(m) }
func PostgresMain(m *testing.M) { pgtest.Main(m) }
