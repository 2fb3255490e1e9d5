package cairnqlibpq_test

import (
	"context"
	"testing"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// A restart of the server under a client on a pool Open made, and on an
// application's *sql.DB given to New, fails calls only with
// cairnq.ErrUnavailable: lib/pq reports most of it as driver.ErrBadConn.
func TestSubmitOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor { return open(t, dsn, nil) })
	})
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
			e := cairnqlibpq.New(appDB(t, dsn), dsn, nil)
			t.Cleanup(func() { e.Close() })
			return e
		})
	})
}

// A program opening before its database is up gets ErrUnavailable, from
// Open (whose first connection checks the server answers) and from
// OpenPostgres over an application's *sql.DB.
func TestOpenOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		adaptertest.OpenOutage(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
			e, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: schema})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
	t.Run("New", func(t *testing.T) {
		adaptertest.OpenOutage(t, func(t *testing.T, dsn, _ string) (executor.Executor, error) {
			e := cairnqlibpq.New(appDB(t, dsn), dsn, nil)
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
}
