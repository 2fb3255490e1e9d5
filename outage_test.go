package cairnq_test

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// Over an executor written elsewhere, which passes its driver's errors
// through with %w and marks nothing, a restart of the server still fails
// the client's calls only with ErrUnavailable: the store recognizes an
// outage in whatever reaches it.
func TestSubmitOutageOnAForeignExecutor(t *testing.T) {
	t.Parallel()
	adaptertest.SubmitOutageClient(t, func(t *testing.T, dsn string) executor.Executor {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return adaptertest.Foreign(db)
	})
}
