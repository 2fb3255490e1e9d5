package cairnqbunsql_test

import (
	"testing"

	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
)

// bun over pgx's stdlib prepares named statements per connection, which a
// transaction-mode pooler binds on other server connections; pgdriver
// writes arguments into the text and sends it in one round trip, and
// listens only on connections proven direct.
func TestBehindPoolers(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		behind := adaptertest.BehindPoolers
		if driver == viaPgdriver {
			behind = adaptertest.BehindPoolersPolling
		}
		behind(t, func(t *testing.T, dsn string) executor.Executor {
			e := cairnqbunsql.New(openBun(t, dsn, driver), nil)
			t.Cleanup(func() { e.Close() })
			return e
		})
	})
}
