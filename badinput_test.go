package cairnq_test

import (
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/badinput"
)

// Every row of the bad-input table, on SQLite: each refusal is typed and
// writes nothing, each positive control is accepted and reads back. The
// same table runs on Postgres in conformance/badinput_test.go.
func TestBadInputTableOnSQLite(t *testing.T) {
	badinput.Run(t, func(t *testing.T) *cairnq.Client { return openTemp(t, nil) })
}
