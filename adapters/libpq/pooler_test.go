package cairnqlibpq_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/adaptertest"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// Behind a transaction-mode pooler lib/pq binds statements by name on
// server connections it does not own: its prepared statements are named
// "1", "2"... per connection, and without binary_parameters a statement
// with arguments is parsed in one round trip and bound in the next, to
// whatever the server connection holds by then. Open and New must both
// work there on their defaults, and in session mode too.
func TestOpenBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		e, err := cairnqlibpq.Open(context.Background(), dsn, nil)
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
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e := cairnqlibpq.New(db, dsn, nil)
		t.Cleanup(func() { e.Close() })
		return e
	})
}

// A pooler that drops the search_path startup parameter (configured to
// ignore it) would put cairnq's tables in the server's default schema:
// Open sees where the connections resolve and refuses, as a schema
// mismatch. A pooler that refuses the parameter fails the connection.
func TestOpenWithASchemaThePoolerDrops(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dropped := pgtest.Pooler(t, dsn, pgtest.PoolSession, "search_path")
	_, err := cairnqlibpq.Open(context.Background(), dropped, &cairnqlibpq.Options{Schema: "jobs"})
	if !errors.Is(err, cairnq.ErrSchemaMismatch) {
		t.Fatalf("Open with a schema the pooler drops: %v, want ErrSchemaMismatch", err)
	}
	refused := pgtest.Pooler(t, dsn, pgtest.PoolTransaction)
	if _, err := cairnqlibpq.Open(context.Background(), refused, &cairnqlibpq.Options{Schema: "jobs"}); err == nil ||
		!strings.Contains(err.Error(), "search_path") {
		t.Fatalf("Open with a schema the pooler refuses: %v, want it to name search_path", err)
	}
}
