package cairnqgorm_test

import (
	"testing"

	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// gorm's postgres driver is pgx's stdlib on pgx's defaults: statements
// prepared under names cached per connection, which a transaction-mode
// pooler binds on other server connections.
func TestBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		db, _ := openGorm(t, dsn, nil)
		e := cairnqgorm.New(db, nil)
		t.Cleanup(func() { e.Close() })
		return e
	})
}
