package sqlexec_test

import (
	"database/sql"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// A restart of the server under a client on database/sql fails calls only
// with cairnq.ErrUnavailable, over lib/pq and over pgx's stdlib alike.
func TestSubmitOutage(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"postgres", "pgx"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
				db, err := sql.Open(driver, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return sqlexec.New(db, nil)
			})
		})
	}
}
