package cairnqpgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// Behind a transaction-mode pooler a pool on pgx's defaults (named
// statements cached per connection) fails at once: a statement prepared on
// one server connection is bound on another. Open and New must both work
// there on their defaults, and in session mode too.
func TestOpenBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		e, err := cairnqpgx.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatalf("Open through the pooler: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}

func TestNewBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		e, _ := newExecutorOn(t, dsn, nil)
		return e
	})
}

// namedStatements counts the statements pgx's cache prepared on the one
// connection of a one-connection pool.
func namedStatements(t *testing.T, e *cairnqpgx.Executor) int64 {
	t.Helper()
	rows := adaptertest.Query(t, e, "SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'stmtcache_%'")
	return rows[0]["n"].(int64)
}

// Preparing spares the server a parse and a plan per statement, and is
// kept wherever the connection keeps its server session: directly, and
// not behind a pooler, in whatever mode (in session mode pg_prepared_statements
// is the connection's own, so it shows what was left there).
func TestStatementsPreparedOnlyWhereTheSessionIsKept(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, c := range []struct {
		name  string
		dsn   string
		named bool
	}{
		{"direct", dsn, true},
		{"session pooler", pgtest.Pooler(t, dsn, pgtest.PoolSession), false},
	} {
		cfg, err := pgxpool.ParseConfig(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 1
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e := cairnqpgx.New(pool, nil)
		t.Cleanup(func() { e.Close() })
		for range 2 { // the first statement learns the route
			adaptertest.Query(t, e, "SELECT $1::int8 AS n", int64(1))
		}
		if got := namedStatements(t, e) > 0; got != c.named {
			t.Errorf("%s: statements prepared = %v, want %v", c.name, got, c.named)
		}
	}
}

// A pooler refusing the search_path startup parameter that Options.Schema
// sets makes Open fail with a *cairnq.OpenError saying what to do, and
// doing it works.
func TestOpenWithASchemaThePoolerRefuses(t *testing.T) {
	t.Parallel()
	adaptertest.OpenWithASchemaThePoolerRefuses(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
		e, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { e.Close() })
		return e, nil
	})
}

// A pooler refusing a connection for good (a database it does not know, a
// startup parameter it does not pass on, a login the server refused)
// answers 08P01, as it does mid-session when it lost its server: at
// connect it is no outage, from Open and from the first statements on an
// application's pool.
func TestConnectRefusedByAPoolerIsNoOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		adaptertest.ConnectRefusedByAPooler(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
			e, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		adaptertest.ConnectRefusedByAPooler(t, func(t *testing.T, dsn, _ string) (executor.Executor, error) {
			e, _ := newExecutorOn(t, dsn, nil)
			return e, nil
		})
	})
}

// A COPY behind a transaction-mode pooler leaves nothing on the server
// connection for the next client there: clients of one connection each,
// taking turns with batches large enough to go by COPY, all succeed.
// (pgx's own CopyFrom described its statement as a named one in the
// pool's default mode; the second client to get that server connection
// failed with "prepared statement ... already exists".)
func TestCopyBehindTransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pooled := pgtest.Pooler(t, pgtest.DSN(t), pgtest.PoolTransaction)
	var clients []*cairnq.Client
	for range 3 {
		e, err := cairnqpgx.Open(ctx, pooled, &cairnqpgx.Options{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cairnq.OpenPostgres(ctx, e, &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			e.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	items := make([]cairnq.SubmitItem, 300)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: "pooled.copy"}
	}
	for round := range 2 {
		for k, c := range clients {
			if _, err := c.SubmitMany(ctx, items); err != nil {
				t.Fatalf("round %d, client %d: %v", round, k, err)
			}
		}
	}
}
