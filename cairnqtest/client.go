package cairnqtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// TB is what the helpers need of a test. *testing.T, *testing.B and
// *testing.F satisfy it; so does anything with these methods, such as a
// recorder checking a helper's failure message.
//
// The helpers expect Fatalf not to return, as testing.T's does not; where
// it returns anyway, the helper returns its zero value at once.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// setupTimeout bounds opening a client, creating and dropping a schema.
const setupTimeout = time.Minute

// NewClient returns a Client on a new SQLite file (tasks.db) in
// tb.TempDir(), opened with opts (nil for the defaults) and closed when
// the test ends. It fails the test if the database cannot be opened.
func NewClient(tb TB, opts *cairnq.SQLiteOptions) *cairnq.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := cairnq.Open(ctx, filepath.Join(tb.TempDir(), "tasks.db"), opts)
	if err != nil {
		tb.Fatalf("cairnqtest: opening a SQLite client: %v", err)
		return nil
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("cairnqtest: closing the SQLite client: %v", err)
		}
	})
	return c
}

// NewPostgresClient returns a Client on ex, the test's Postgres executor
// (an adapter over its pool: cairnqpgx.New, sqlexec.New, ...), in a new
// schema of its own that is dropped with everything in it when the test
// ends, after the client is closed. Tests running in parallel on one
// executor therefore see only their own tasks.
//
// opts (nil for the defaults) is used as given except for Schema, which
// NewPostgresClient chooses, and CloseExecutor, which it ignores: ex stays
// the caller's. It fails the test if the schema cannot be made or the
// client cannot be opened.
//
// The client reaches its schema through SET LOCAL search_path at the start
// of every transaction it opens (a statement outside one runs in one), and
// leaves the pool's own settings alone. A transaction the test opens
// itself and hands to Client.SubmitTx or TaskContext.SucceedTx must do the
// same first; PostgresSchema gives the schema's name.
func NewPostgresClient(tb TB, ex executor.Executor, opts *cairnq.PostgresOptions) *cairnq.Client {
	tb.Helper()
	scopedEx, schema := PostgresSchema(tb, ex)
	if scopedEx == nil {
		return nil
	}
	o := cairnq.PostgresOptions{}
	if opts != nil {
		o = *opts
	}
	o.Schema, o.CloseExecutor = schema, false
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c, err := cairnq.OpenPostgres(ctx, scopedEx, &o)
	if err != nil {
		tb.Fatalf("cairnqtest: opening a Postgres client in schema %s: %v", schema, err)
		return nil
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("cairnqtest: closing the Postgres client in schema %s: %v", schema, err)
		}
	})
	return c
}

// PostgresSchema creates a new, empty schema on ex for this test, named
// "cairnqtest_" and 16 random hex digits, and drops it (CASCADE) when the
// test ends. It returns an executor whose every transaction runs with
// search_path set to that schema, for cairnq.OpenPostgres (with
// PostgresOptions.Schema set to the name) or the application's own code,
// and the schema's name. Closing the returned executor leaves ex open.
// NewPostgresClient is PostgresSchema followed by OpenPostgres.
func PostgresSchema(tb TB, ex executor.Executor) (executor.Executor, string) {
	tb.Helper()
	if ex == nil {
		tb.Fatalf("cairnqtest: PostgresSchema: the executor is nil")
		return nil, ""
	}
	schema := newSchemaName()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := ex.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("cairnqtest: creating schema %s: %v", schema, err)
		return nil, ""
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := ex.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			tb.Errorf("cairnqtest: dropping schema %s: %v", schema, err)
		}
	})
	return scope(ex, schema), schema
}

// newSchemaName returns a fresh schema name: a plain lower-case
// identifier, safe to write into SQL unquoted.
func newSchemaName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return "cairnqtest_" + hex.EncodeToString(b[:])
}

// NewWorker returns a worker on c with opts (nil for the defaults), for
// Work and Drain. It fails the test if the options are refused.
func NewWorker(tb TB, c *cairnq.Client, opts *cairnq.WorkerOptions) *cairnq.Worker {
	tb.Helper()
	w, err := cairnq.NewWorker(c, opts)
	if err != nil {
		tb.Fatalf("cairnqtest: NewWorker: %v", err)
		return nil
	}
	return w
}
