package conformance_test

import (
	"testing"

	"github.com/cairnq/cairnq-go/conformance"
)

// Every Postgres test here shares one throwaway server, stopped when the
// tests end. The scenarios run on Postgres through the certification of
// each executor (certify_test.go).
func TestMain(m *testing.M) { conformance.PostgresMain(m) }
