package cairnqbunsql_test

import (
	"context"
	"testing"

	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
)

// The adapter certifies itself through the same public call a third party
// uses, on the application's own *bun.DB, over each driver bun runs on.
func TestCertify(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			conformance.CertifyExecutor(t, conformance.Factory{
				Name: "bun over " + driver,
				Open: func(t testing.TB, dsn string) executor.Executor {
					return cairnqbunsql.New(openBun(t, dsn, driver), nil)
				},
				AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
					return ex.(*cairnqbunsql.Executor).BunDB().PingContext(ctx)
				},
			})
		})
	}
}
