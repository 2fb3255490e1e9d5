// Package sqlexec is a generic [executor.Executor] over database/sql, for
// applications that already hold a *sql.DB (lib/pq, pgx's stdlib, or any
// other Postgres driver) or a *sqlx.DB.
//
// The executor runs on the application's own pool: it opens no connections
// of its own and its Close leaves the pool open. Because database/sql has no
// LISTEN, this package offers no [executor.Listener]; the driver adapters
// (adapters/libpq, adapters/pgx) add one where their driver can.
//
// # Rows
//
// Each column is scanned into an any, so rows cross the seam exactly as the
// driver produced them, and the store normalizes them. Drivers differ: a
// void, numeric, array or name column arrives from lib/pq as the text's
// []byte and from pgx's stdlib as a string (both give int64 for integers,
// []byte for jsonb, string for text). A []byte value is a copy the row owns
// (database/sql copies driver bytes when it scans them into an any), so a
// row stays valid after the next one is read.
//
// # Sessions and native handles
//
// A session knows the database/sql value it runs on, so code handed a
// session can reach its own driver's type instead of an any:
//
//   - the *Executor itself runs on the pool: [Executor.DB] and
//     [Executor.Native] return it;
//   - a session passed to [Executor.Tx]'s fn, or made by [TxSession] from a
//     transaction the application holds, runs on one *sql.Tx: [TxOf] returns
//     it, as do the session's SQLTx and Native methods;
//   - [ConnSession] runs on one reserved *sql.Conn: [ConnOf] returns it.
//
// # Behind a connection pooler
//
// Behind a transaction-mode pooler each statement outside a transaction
// may reach another server connection, so nothing a statement leaves on
// one may be needed by the next. Two drivers need care, and get it on
// their defaults:
//
//   - lib/pq (told by its driver's package): a statement with arguments
//     that runs on the pool has them written into its text as literals
//     ([protocol.Inline]) and goes as one message, leaving nothing on the
//     server connection: lib/pq's own way takes two round trips, a parse
//     and then a bind to "the unnamed statement" of whatever server
//     connection the second one reaches. The statement's text then holds
//     the values, where the server shows or logs it (pg_stat_activity, a
//     failed statement in the log). With binary_parameters=yes in the DSN
//     lib/pq sends arguments in one round trip: set
//     [Options.Arguments] to [ArgumentsBind] to keep them bound (the
//     lib/pq adapter does where it knows the setting). A lib/pq behind an
//     instrumentation wrapper is not told apart: set [ArgumentsInline].
//   - pgx's stdlib, whose default prepares each statement under a name:
//     cairnq's statements run with pgx.QueryExecModeCacheDescribe (one
//     round trip, unnamed) as their first argument, unless the pool's
//     connections are proven to keep one server session each (the server
//     sees this client's own address, or the connection's backend key is
//     the server's, which no pooler passes on). This package reaches pgx's
//     public API by reflection for that, since it imports no driver.
//
// Statements in a transaction the application holds ([TxSession]) go as
// the application's own statements in it do.
//
// This package imports only the standard library (and this module's
// executor, protocol, internal/pgroute and internal/sqlrows, which do
// too); it never imports a driver.
package sqlexec
