package cairnq

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// SchemaStatus is what a database says about its cairnq installation
// (cairnq_meta's versions and the migration ledger) compared with this
// SDK: its State, the versions on both sides, the ledger, and the
// migrations missing or unknown.
type SchemaStatus = cairnqtype.SchemaStatus

// SchemaState sums up a SchemaStatus.
type SchemaState = cairnqtype.SchemaState

// The schema states.
const (
	// SchemaAbsent: no cairnq tables (or no database at all).
	SchemaAbsent = cairnqtype.SchemaAbsent
	// SchemaCurrent: every migration this SDK has is applied, and none it
	// does not know.
	SchemaCurrent = cairnqtype.SchemaCurrent
	// SchemaBehind: the ledger lacks migrations this SDK has.
	SchemaBehind = cairnqtype.SchemaBehind
	// SchemaAhead: a newer SDK of the same protocol major migrated the
	// database further; it stays usable.
	SchemaAhead = cairnqtype.SchemaAhead
	// SchemaIncompatible: the database speaks another protocol major (or
	// records none).
	SchemaIncompatible = cairnqtype.SchemaIncompatible
)

// AppliedMigration is one row of the migration ledger.
type AppliedMigration = cairnqtype.AppliedMigration

// QueueAge is how long one queue's due work has waited; see QueueAges.
type QueueAge = cairnqtype.QueueAge

// FailureCount is how many tasks of one name failed within a window; see
// RecentFailures.
type FailureCount = cairnqtype.FailureCount

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
