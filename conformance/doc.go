// Package conformance holds the cairnq conformance machinery for the Go SDK.
//
// It contains an interpreter for the language-neutral scenario format (JSON
// files of steps and assertions that pin cairnq's behaviour), which drives any
// implementation through the small Target interface, and this module's own
// scenarios in the scenarios directory.
//
// It also holds the executor certification suite: [CertifyExecutor]
// certifies an executor.Executor (the seam between cairnq's Postgres store
// and a driver) against a real PostgreSQL server, check by check, then runs
// every scenario and a short worker run on top of it. A third party
// certifies its own adapter with one call:
//
//	func TestMain(m *testing.M) { pgserver.Main(m) }
//
//	func TestMyExecutor(t *testing.T) {
//		conformance.CertifyExecutor(t, conformance.Factory{Open: openMyExecutor})
//	}
//
// Each check is a named subtest saying what is wrong and how to fix it:
// int8 and jsonb normalization, null and typed parameters, multi-statement
// Exec, SQLSTATE reachable through errors.As, Tx commit and rollback (on
// error and on panic), one connection per Tx, rows by position matching
// Query's (where the executor has PositionalQuerier), COPY writing exactly
// the rows given inside the session's transaction (where its sessions
// have Copier), LISTEN channels and
// stop, that closing the store leaves the application's pool alone, and
// concurrent submits each getting their own row back; then every scenario
// and a short worker run. Every adapter in this repository certifies
// itself through this same call.
//
// [pgserver.DSN] and [pgserver.Main] provision the server: CAIRNQ_TEST_PG_DSN,
// else a Docker container through testcontainers when the test binary
// imports conformance/pgdocker, else local PostgreSQL binaries;
// CAIRNQ_REQUIRE_PG=1 turns "no server" from a skip into a failure.
//
// A scenario is a named list of steps. A step runs one op with args, may save
// its result under an alias, and may assert on it inline ("expect") or assert
// that it fails ("expectError"). Strings of the form "$alias", "$alias.field"
// or "$alias.0.field" anywhere in args or expectations are replaced by saved
// values before use. A step with op "expect" runs nothing and asserts on its
// "target". The op "sleep" ({"ms": n}) is handled by the interpreter itself;
// every other op goes to the Target.
package conformance
