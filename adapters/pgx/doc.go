// Package cairnqpgx is cairnq's executor for pgx v5: it runs the Postgres
// store over a *pgxpool.Pool, natively (no database/sql), and provides LISTEN
// for fast wakeups.
//
// Two ways in:
//
//   - [New] wraps a pool the application already owns. cairnq never
//     reconfigures it and [Executor.Close] leaves it open; statements run in
//     the [Options.ExecMode] passed per query, so an application pool set up
//     for a transaction pooler keeps working.
//   - [Open] builds a pool from a DSN and owns it. With [Options.Schema] it
//     creates the schema and sets search_path on every connection of that
//     pool. Making each connection of that pool is bounded by
//     [Options.ConnectTimeout] (else the DSN's connect_timeout, else
//     [DefaultConnectTimeout]), so a server that accepts connections and
//     never answers cannot hang Open or, later, the pool.
//
// # What crosses the seam
//
// [Executor.Query] returns rows exactly as pgx's Rows.Values decodes them
// (bigint as int64, jsonb already decoded, unknown types such as void as the
// server's text): the store normalizes them, so the adapter never touches
// the application's type map. Statements and scripts are run as given;
// [Executor.Exec] always uses the simple protocol so that a migration may
// hold several statements.
//
// # Sharing transactions
//
// A session knows its native form. Inside [Executor.Tx] the session is a
// [*Session] whose PgxTx method returns the pgx.Tx, so application writes
// and cairnq's settlement commit or roll back together ([PgxTx] extracts it
// from an executor.Session). The other direction, [TxSession] wraps a pgx.Tx
// the application opened, so cairnq can submit or settle inside it.
//
// # LISTEN
//
// [Executor.Listen] takes one connection out of the pool (acquire, then
// hijack: no DSN is parsed again, so custom dialers, TLS and auth hooks keep
// working), LISTENs on it and delivers notifications from one goroutine. A
// dropped connection is replaced with jittered exponential backoff (on the
// timing every adapter here shares, which the package documentation of
// [executor] gives) and the channels are listened on again, after which
// [Options.OnReconnect] runs so the caller can poll for what it may have
// missed. A server that refuses LISTEN (SQLSTATE 0A000) yields
// [executor.ErrListenUnavailable], which is permanent: the caller polls
// instead.
//
// # Errors
//
// Errors are wrapped as "cairnq/pgx: <op>: ..." with %w, so errors.As still
// finds *pgconn.PgError, or any error with a SQLState() string method, and
// errors.Is still finds context.Canceled and context.DeadlineExceeded. A
// database out of reach (the connection lost, the server starting up or
// shutting down, no connection to be made) is also cairnq.ErrUnavailable
// to errors.Is. A connection refused while it is being made is not: a
// wrong password, an unknown database, and a pooler's refusal, which
// pgbouncer answers with SQLSTATE 08P01 (an unknown database, a startup
// parameter it does not pass on), the code it also answers mid-session
// when it lost its server, which is an outage. pgx's *pgconn.ConnectError
// tells the two apart, on a pool [Open] makes and on one given to [New]
// alike. [Open] with [Options.Schema] through a pooler that refuses
// the search_path startup parameter (pgbouncer) fails with a
// *cairnq.OpenError saying what to do instead.
package cairnqpgx
