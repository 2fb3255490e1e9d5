package adaptertest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// SchemaOpener opens the executor under test from dsn the way an
// adapter's Open does, with its Options.Schema set to schema ("" for
// none), returning Open's error; an executor it returns is closed at
// cleanup.
type SchemaOpener func(t *testing.T, dsn, schema string) (executor.Executor, error)

// OpenWithASchemaThePoolerRefuses opens through a pgbouncer on its
// defaults, which refuses the search_path startup parameter that
// Options.Schema sets, with SQLSTATE 08P01 and no connection: Open must
// fail with a *cairnq.OpenError that says what to do instead, holding the
// server's error, and that is no outage (errors.Is finds no
// cairnq.ErrUnavailable: retrying cannot help). Then it does what the
// error says (the schema and the role's search_path set on the server, a
// pooler whose server connections start after that, Open without the
// option, the schema given to cairnq.PostgresOptions) and checks that
// cairnq's tables land in the schema.
func OpenWithASchemaThePoolerRefuses(t *testing.T, open SchemaOpener) {
	const schema = "jobs"
	ctx := Ctx(t)
	dsn := pgtest.DSN(t)
	_, err := open(t, pgtest.Pooler(t, dsn, pgtest.PoolTransaction), schema)
	var oe *cairnq.OpenError
	if !errors.As(err, &oe) {
		t.Fatalf("Open with a schema the pooler refuses: %T %v, want a *cairnq.OpenError", err, err)
	}
	if errors.Is(err, cairnq.ErrUnavailable) {
		t.Errorf("Open with a schema the pooler refuses reads as an outage: %v", err)
	}
	var st interface{ SQLState() string }
	if !errors.As(err, &st) || st.SQLState() != "08P01" {
		t.Errorf("Open with a schema the pooler refuses: %v, want the pooler's SQLSTATE 08P01 inside", err)
	}
	for _, want := range []string{"search_path", "ALTER ROLE", "cairnq.PostgresOptions.Schema"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the OpenError does not say %q:\n%v", want, err)
		}
	}
	t.Logf("the OpenError: %v", err)

	// What it says to do.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	if _, err := direct.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema+"; ALTER ROLE "+
		pgx.Identifier{cfg.User}.Sanitize()+" IN DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET search_path = "+schema); err != nil {
		t.Fatal(err)
	}
	ex, err := open(t, pgtest.Pooler(t, dsn, pgtest.PoolTransaction), "")
	if err != nil {
		t.Fatalf("Open through the pooler without a schema: %v", err)
	}
	c, err := cairnq.OpenPostgres(context.Background(), ex, &cairnq.PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatalf("OpenPostgres with the schema set on the server: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Submit(ctx, "in-schema", nil, nil); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT count(*) FROM "+schema+".cairnq_tasks").Scan(&n); err != nil || n != 1 {
		t.Errorf("tasks in schema %s: %d (%v), want 1", schema, n, err)
	}
}
