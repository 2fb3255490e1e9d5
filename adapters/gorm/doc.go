// Package cairnqgorm runs cairnq on an application's *gorm.DB
// (gorm.io/gorm over gorm.io/driver/postgres): cairnq shares the
// application's pool, and tasks are submitted and settled inside the
// application's own gorm transactions.
//
//	db, _ := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")), &gorm.Config{})
//	client, _ := cairnq.OpenPostgres(ctx, cairnqgorm.New(db, nil), nil)
//	defer client.Close()
//
// This package is a module of its own, so that gorm stays out of the module
// graph of programs that use cairnq without it:
//
//	go get github.com/cairnq/cairnq-go/adapters/gorm
//
// # What is left alone
//
// [New] changes nothing of the *gorm.DB: not its config, logger, naming
// strategy, callbacks or plugins, and [Executor.Close] does not close it.
// cairnq's statements go straight to the pool (gorm's ConnPool), not through
// gorm's statement builder: gorm's Raw would rewrite the ? and @name in them
// and log each one through the application's logger. So cairnq's own
// statements never show in gorm's logger, and gorm's prepared-statement
// cache (PrepareStmt) is bypassed for them. Rows cross the seam as pgx's
// stdlib produced them; errors are wrapped with %w, so errors.As still finds
// the *pgconn.PgError, and a database out of reach is also
// cairnq.ErrUnavailable to errors.Is.
//
// # Sharing transactions
//
// Both directions go through gorm's own transactions, so hooks, savepoints
// and associations behave as the application expects:
//
//   - cairnq opens the transaction: [SucceedIn] (over
//     cairnq.TaskContext.SucceedIn) hands a handler the transaction as a
//     *gorm.DB, the handler writes its models, and the task's settlement
//     commits with them or not at all. [GormDB] extracts the *gorm.DB from
//     any session of [Executor.Tx].
//   - the application holds the transaction: inside
//     db.Transaction(func(tx *gorm.DB) error {...}), [SubmitTx] submits and
//     [SucceedTx] settles on tx ([TxSession] wraps tx for cairnq's untyped
//     calls).
//
// # LISTEN
//
// [Executor.Listen] reserves one connection of the application's pool
// ((*sql.DB).Conn) and LISTENs on the pgx connection under it (reached
// through Conn.Raw): no second pool and no DSN, so custom connectors, TLS
// and auth keep working. The reserved connection counts against the pool's
// MaxOpenConns while cairnq listens. A dropped connection is replaced with
// backoff, then [Options.OnReconnect] runs. Where LISTEN cannot be had (a
// driver other than pgx's stdlib, a pool of one connection, a server that
// refuses it) Listen reports [executor.ErrListenUnavailable] and cairnq
// polls.
package cairnqgorm
