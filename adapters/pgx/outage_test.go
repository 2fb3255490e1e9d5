package cairnqpgx_test

import (
	"context"
	"testing"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// A restart of the server under a client on a pool Open made, and on an
// application's pool given to New, fails calls only with
// cairnq.ErrUnavailable.
func TestSubmitOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
			e, err := cairnqpgx.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e
		})
	})
	t.Run("New", func(t *testing.T) {
		t.Parallel()
		adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
			e, _ := newExecutorOn(t, dsn, nil)
			return e
		})
	})
}

// Behind pgbouncer the restart reads differently: the pooler stays up and
// answers for the server with SQLSTATE 08P01, which must read as an
// outage too. The classification is the driver's SQLSTATE, the same for
// every adapter, so one adapter runs it.
func TestSubmitOutageBehindPooler(t *testing.T) {
	t.Parallel()
	adaptertest.SubmitOutageBehindPooler(t, pgtest.PoolTransaction, func(t *testing.T, dsn string) executor.Executor {
		e, err := cairnqpgx.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}

// A program opening before its database is up gets ErrUnavailable, from
// Open (which checks the server answers) and from OpenPostgres over an
// application's pool.
func TestOpenOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		adaptertest.OpenOutage(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
			e, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
	t.Run("New", func(t *testing.T) {
		adaptertest.OpenOutage(t, func(t *testing.T, dsn, _ string) (executor.Executor, error) {
			e, _ := newExecutorOn(t, dsn, nil)
			return e, nil
		})
	})
}
