// Package cairnqlibpq runs cairnq on github.com/lib/pq through database/sql.
//
// Two ways in:
//
//   - [Open] makes a pool of its own from a DSN (and, with [Options.Schema],
//     creates that schema and puts it on every connection's search_path);
//     [Executor.Close] closes that pool. Making each of its connections is
//     bounded by [Options.ConnectTimeout] (else the DSN's connect_timeout,
//     else [DefaultConnectTimeout]), and so is making the listener's. Its
//     connections send arguments in one round trip (binary_parameters,
//     unless the DSN says otherwise) and keep cairnq's statements prepared
//     (unless [Options.NoPrepare]), which lib/pq does neither of by default.
//   - [New] runs on the application's own *sql.DB, which stays the
//     application's: Close leaves it open, and cairnq never changes its
//     settings.
//
// Statements, transactions and sessions come from [sqlexec]: rows cross the
// seam as lib/pq produced them, a transaction's session is bound to a
// *sql.Tx ([TxOf]), and [TxSession] lets cairnq join a transaction the
// application holds. Errors keep lib/pq's own: errors.As finds the *pq.Error
// (whose SQLState method gives the SQLSTATE). A database out of reach (the
// connection lost, which lib/pq mostly reports as driver.ErrBadConn, the
// server starting up or shutting down, no connection to be made) is also
// cairnq.ErrUnavailable to errors.Is. A connection refused while it is
// being made is not: a wrong password, an unknown database, and a pooler's
// refusal, which pgbouncer answers with SQLSTATE 08P01 (an unknown
// database, a startup parameter it does not pass on), the code it also
// answers mid-session when it lost its server, which is an outage. Only
// the pool [Open] makes tells the two apart, through its own connector;
// over an application's *sql.DB given to [New] lib/pq's errors do not say
// when they came, and a pooler's 08P01 at connect is ErrUnavailable too.
// [Open] with [Options.Schema] through
// a pooler that refuses the search_path startup parameter (pgbouncer) fails
// with a *cairnq.OpenError saying what to do instead.
//
// The executor is an [executor.Listener]: LISTEN runs on a pq.Listener, a
// connection of its own opened from the DSN (lib/pq cannot lend a pooled
// connection for it). When the connection drops it is replaced with
// backoff, on the reconnect loop and with the timing every adapter here
// shares (the package documentation of [executor] gives it), unless
// [Options.MinReconnectInterval] and [Options.MaxReconnectInterval] say
// otherwise. That is why [New] takes a DSN too; without one, Listen
// reports [executor.ErrListenUnavailable] and cairnq polls instead.
package cairnqlibpq
