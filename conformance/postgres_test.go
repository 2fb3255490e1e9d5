package conformance_test

import (
	"testing"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// Every Postgres test here shares one throwaway server, stopped when the
// tests end. The scenarios run on Postgres through the certification of
// each executor (certify_test.go).
func TestMain(m *testing.M) { pgserver.Main(m) }

// TestPostgresSource says where this binary's server came from, for the CI
// log (run with -v): CAIRNQ_TEST_PG_DSN or the local binaries here, since
// this module links no Docker path (conformance/pgdocker's tests take it).
func TestPostgresSource(t *testing.T) {
	t.Logf("the server comes from %s", pgtest.Source(t))
}
