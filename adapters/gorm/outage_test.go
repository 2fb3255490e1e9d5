package cairnqgorm_test

import (
	"testing"

	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// A restart of the server under a client on gorm's pool fails calls only
// with cairnq.ErrUnavailable.
func TestSubmitOutage(t *testing.T) {
	t.Parallel()
	adaptertest.SubmitOutage(t, func(t *testing.T, dsn string) executor.Executor {
		db, _ := openGorm(t, dsn, nil)
		e := cairnqgorm.New(db, nil)
		t.Cleanup(func() { e.Close() })
		return e
	})
}
