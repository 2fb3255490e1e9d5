package conformance_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/internal/testkit/badinput"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// Every row of the bad-input table (internal/testkit/badinput), on Postgres through
// the pgx adapter: the same refusals as on SQLite (badinput_test.go in the
// root package), the same positive controls. One database, one schema per
// row, so each row starts from an empty installation.
func TestBadInputTableOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	var n atomic.Int64
	badinput.Run(t, func(t *testing.T) *cairnq.Client {
		schema := fmt.Sprintf("badinput_%d", n.Add(1))
		return pgClientWith(t, dsn, &cairnqpgx.Options{Schema: schema, MaxConns: 4})
	})
}
