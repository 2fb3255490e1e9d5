package sqlexec_test

import (
	"database/sql"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/adaptertest"
)

// database/sql over lib/pq on its defaults sends a statement with
// arguments as a parse in one round trip and a bind in the next, which a
// transaction-mode pooler may route to different server connections.
func TestLibpqBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return sqlexec.New(db, nil)
	})
}
