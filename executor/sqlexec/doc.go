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
// On lib/pq (told by the driver's package), a statement with arguments
// that runs on the pool has its arguments written into its text as
// literals ([protocol.Inline]) and goes as one message, leaving nothing on
// the server connection: lib/pq's own way with arguments takes two round
// trips that a transaction-mode pooler may send to two different server
// connections. Other drivers send statements as the application
// configured them, which behind a transaction-mode pooler must be a way
// that keeps no statement on the server between round trips, as the
// application's own statements need: for pgx's stdlib, a
// default_query_exec_mode of cache_describe, exec or simple_protocol (the
// gorm and bun adapters choose one for cairnq's statements themselves).
//
// This package imports only the standard library (and packages executor
// and protocol, which do too); it never imports a driver.
package sqlexec
