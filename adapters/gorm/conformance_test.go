package cairnqgorm_test

import (
	"context"
	"testing"

	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
)

// The adapter certifies itself through the same public call a third party
// uses: every check, every scenario and a worker run, on the application's
// own *gorm.DB.
func TestCertify(t *testing.T) {
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "gorm",
		Open: func(t testing.TB, dsn string) executor.Executor {
			db, _ := openGorm(t, dsn, nil)
			return cairnqgorm.New(db, nil)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			sqlDB, err := ex.(*cairnqgorm.Executor).GormDB().DB()
			if err != nil {
				return err
			}
			return sqlDB.PingContext(ctx)
		},
	})
}
