package cairnqbunsql_test

import (
	"testing"

	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// A restart of the server under a client on bun fails calls only with
// cairnq.ErrUnavailable, over pgx's stdlib and over bun's pgdriver alike.
func TestSubmitOutage(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
			e := cairnqbunsql.New(openBun(t, dsn, driver), nil)
			t.Cleanup(func() { e.Close() })
			return e
		})
	})
}
