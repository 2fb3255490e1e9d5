package cairnqlibpq_test

import (
	"context"
	"database/sql"
	"testing"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/adaptertest"
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
