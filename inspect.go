package cairnq

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// SchemaStatus is what a database says about its cairnq installation
// (cairnq_meta's versions and the migration ledger) compared with this
// SDK; see engine.SchemaStatus for its fields and JSON.
type SchemaStatus = engine.SchemaStatus

// SchemaState sums up a SchemaStatus.
type SchemaState = engine.SchemaState

// The schema states; see engine.SchemaAbsent and its neighbours.
const (
	SchemaAbsent       = engine.SchemaAbsent
	SchemaCurrent      = engine.SchemaCurrent
	SchemaBehind       = engine.SchemaBehind
	SchemaAhead        = engine.SchemaAhead
	SchemaIncompatible = engine.SchemaIncompatible
)

// AppliedMigration is one row of the migration ledger.
type AppliedMigration = engine.AppliedMigration

// QueueAge is how long one queue's due work has waited; see QueueAges.
type QueueAge = engine.QueueAge

// FailureCount is how many tasks of one name failed within a window; see
// RecentFailures.
type FailureCount = engine.FailureCount

// InspectSQLite reports the cairnq installation of the SQLite database at
// path (its protocol and schema versions and migration ledger, compared
// with this SDK) without opening a client, creating or changing anything:
// a missing file is a status with State SchemaAbsent. It answers where
// Open with OpenExisting would refuse (a database behind, ahead or of
// another protocol major), which is what cairnq migrate --check prints.
func InspectSQLite(ctx context.Context, path string) (*SchemaStatus, error) {
	return engine.InspectSQLite(ctx, path)
}

// InspectPostgres is InspectSQLite for the database ex's connections
// resolve to; ex stays open. schema is PostgresOptions.Schema: a named
// schema that does not exist is a status with State SchemaAbsent, and
// connections resolving elsewhere fail with ErrSchemaMismatch.
func InspectPostgres(ctx context.Context, ex executor.Executor, schema string) (*SchemaStatus, error) {
	return engine.InspectPostgres(ctx, ex, schema)
}

// ExpiredLeases returns running tasks whose lease has expired and that no
// claim has recovered yet, longest expired first, at most limit (0: 100).
// A worker's claim recovers them, so any that linger mean no worker has
// claimed on this database since their lease ran out. It only reads.
func (c *Client) ExpiredLeases(ctx context.Context, limit int) ([]*Task, error) {
	if err := checkCtx(ctx, "expired leases"); err != nil {
		return nil, err
	}
	return c.store.ExpiredLeases(ctx, limit)
}

// QueueAges returns, for each queue holding queued tasks that are due, how
// many there are and how long the longest-waiting of them has been
// claimable (by the database clock on Postgres), in queue order. Delayed
// tasks not yet due are not counted. It only reads.
func (c *Client) QueueAges(ctx context.Context) ([]QueueAge, error) {
	if err := checkCtx(ctx, "queue ages"); err != nil {
		return nil, err
	}
	return c.store.QueueAges(ctx)
}

// RecentFailures counts, per task name, the tasks that failed for good
// within the last window (> 0), most failures first. Attempts that failed
// and were retried are not counted. It only reads.
func (c *Client) RecentFailures(ctx context.Context, window time.Duration) ([]FailureCount, error) {
	if err := checkCtx(ctx, "recent failures"); err != nil {
		return nil, err
	}
	return c.store.RecentFailures(ctx, window)
}
