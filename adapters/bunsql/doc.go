// Package cairnqbunsql runs cairnq on an application's *bun.DB
// (github.com/uptrace/bun with pgdialect, over pgx's stdlib or bun's own
// pgdriver): cairnq shares the application's pool, and tasks are submitted
// and settled inside the application's own bun transactions.
//
//	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(os.Getenv("DATABASE_URL"))))
//	client, _ := cairnq.OpenPostgres(ctx, cairnqbunsql.New(bun.NewDB(sqldb, pgdialect.New()), nil), nil)
//	defer client.Close()
//
// This package is a module of its own, so that bun stays out of the module
// graph of programs that use cairnq without it:
//
//	go get github.com/cairnq/cairnq-go/adapters/bunsql
//
// # What is left alone
//
// [New] changes nothing of the *bun.DB, and [Executor.Close] does not close
// it. cairnq's statements run on the *sql.DB, *sql.Tx or *sql.Conn inside
// bun's types, not through bun's QueryContext: bun formats arguments into
// the text itself (its ? placeholders) and would leave cairnq's $1..$n
// unbound. So bun's query hooks (bundebug, bunotel) do not see cairnq's
// statements; they do see the BEGIN and COMMIT of [Executor.Tx], which goes
// through bun's RunInTx. Rows cross the seam as the driver produced them
// (pgdriver: int64, float64, bool, string, time.Time, and []byte for jsonb
// and the other types it does not decode). pgdriver itself always
// interpolates arguments into the text client-side and uses the simple
// protocol; pgx's stdlib binds them.
//
// # Errors
//
// Errors are wrapped as "cairnq/bun: <op>: ..." with %w. pgx's stdlib
// returns *pgconn.PgError, which has a SQLState method. pgdriver's server
// errors (pgdriver.Error) carry their code only as Field('C'), so this
// package wraps them in an error whose SQLState method returns it;
// errors.As still finds the pgdriver.Error. A database out of reach (the
// connection lost, the server starting up or shutting down, no connection
// to be made) is also cairnq.ErrUnavailable to errors.Is, on either
// driver.
//
// # Sharing transactions
//
//   - cairnq opens the transaction: [SucceedIn] (over
//     cairnq.TaskContext.SucceedIn) hands a handler the bun.Tx; the
//     handler's inserts and the task's settlement commit together or not at
//     all. [BunTx] extracts the bun.Tx from any session of [Executor.Tx].
//   - the application holds the transaction: inside
//     db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {...}),
//     [SubmitTx] submits and [SucceedTx] settles on tx. [TxSession] wraps a
//     bun.Tx and [IDBSession] any bun.IDB for cairnq's untyped calls.
//
// # LISTEN
//
// [Executor.Listen] uses what the driver offers: over pgdriver, a
// pgdriver.Listener (a connection of its own, dialed from the pool's
// connector, so no DSN is needed); over pgx's stdlib, one connection
// reserved from the application's pool (counted against its MaxOpenConns)
// and LISTENed on through Conn.Raw. A dropped connection is replaced with
// backoff, then [Options.OnReconnect] runs. Where LISTEN cannot be had (any
// other driver, a pool of one connection, a server that refuses it) Listen
// reports [executor.ErrListenUnavailable] and cairnq polls.
package cairnqbunsql
