package cairnq

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// SchemaStatus is what a database says about its cairnq installation:
// cairnq_meta's versions and the migration ledger, compared with this SDK.
// The JSON names are the struct tags'.
type SchemaStatus struct {
	// State sums up the comparison; see SchemaState.
	State SchemaState `json:"state"`
	// Schema is, on Postgres, the schema the connection resolves to
	// ("" when none of its search_path exists); "" on SQLite.
	Schema string `json:"schema,omitempty"`
	// ProtocolVersion and SchemaVersion are cairnq_meta's protocol_version
	// and schema_version; 0 when absent.
	ProtocolVersion int `json:"protocol_version"`
	SchemaVersion   int `json:"schema_version"`
	// SDKProtocolVersion and SDKSchemaVersion are this SDK's
	// (package protocol's ProtocolVersion and SchemaVersion).
	SDKProtocolVersion int `json:"sdk_protocol_version"`
	SDKSchemaVersion   int `json:"sdk_schema_version"`
	// Migrations is the ledger, in name order; empty when it is absent.
	Migrations []AppliedMigration `json:"migrations"`
	// Missing names this SDK's migrations the ledger lacks, in the order
	// they would be applied; Unknown the ledger entries this SDK does not
	// have (a newer SDK's). Never nil.
	Missing []string `json:"missing"`
	Unknown []string `json:"unknown"`
}

// SchemaState sums up a SchemaStatus: how a database's cairnq
// installation compares with the migrations this SDK carries.
type SchemaState string

// The schema states.
const (
	// SchemaAbsent: no cairnq tables (or no database at all).
	SchemaAbsent SchemaState = "absent"
	// SchemaCurrent: every migration this SDK has is applied, and none it
	// does not know.
	SchemaCurrent SchemaState = "current"
	// SchemaBehind: the ledger lacks migrations this SDK has; opening a
	// client without Options.OpenExisting (or cairnq migrate) applies
	// them.
	SchemaBehind SchemaState = "behind"
	// SchemaAhead: a newer SDK of the same protocol major migrated the
	// database further; it stays usable.
	SchemaAhead SchemaState = "ahead"
	// SchemaIncompatible: the database speaks another protocol major (or
	// records none). Nothing of this SDK may touch it.
	SchemaIncompatible SchemaState = "incompatible"
)

// AppliedMigration is one row of the migration ledger (cairnq_migrations)
// every SDK shares. Its JSON is {"name", "applied_at_ms"}.
type AppliedMigration struct {
	Name      string // the migration's file name, e.g. "0001_init.sql"
	AppliedAt time.Time
}

// MarshalJSON writes the ledger row as the table holds it.
func (m AppliedMigration) MarshalJSON() ([]byte, error) {
	return cairnqtype.AppliedMigration(m).MarshalJSON()
}

// QueueAge is how long one queue's due work has waited (see QueueAges):
// its queued tasks whose run_at has come, and how long the
// longest-waiting of them has been claimable. Its JSON is {"queue",
// "due", "oldest_run_at_ms", "oldest_age_ms"}.
type QueueAge struct {
	Queue       string
	Due         int
	OldestRunAt time.Time
	// OldestAge is the database clock's now minus OldestRunAt (SQLite: this
	// process's clock).
	OldestAge time.Duration
}

// MarshalJSON writes the queue's age with times in epoch milliseconds.
func (a QueueAge) MarshalJSON() ([]byte, error) { return cairnqtype.QueueAge(a).MarshalJSON() }

// FailureCount is how many tasks of one name failed for good within a
// window, and when the last did (see RecentFailures). Its JSON is
// {"name", "count", "last_failed_at_ms"}.
type FailureCount struct {
	Name         string
	Count        int
	LastFailedAt time.Time
}

// MarshalJSON writes the count with the time in epoch milliseconds.
func (f FailureCount) MarshalJSON() ([]byte, error) {
	return cairnqtype.FailureCount(f).MarshalJSON()
}

// InspectSQLite reports the cairnq installation of the SQLite database at
// path (its protocol and schema versions and migration ledger, compared
// with this SDK) without opening a client, creating or changing anything:
// a missing file is a status with State SchemaAbsent. It answers where
// Open with OpenExisting would refuse (a database behind, ahead or of
// another protocol major), which is what cairnq migrate --check prints.
func InspectSQLite(ctx context.Context, path string) (*SchemaStatus, error) {
	st, err := engine.InspectSQLite(ctx, path)
	return schemaStatusOf(st), userErr(err)
}

// InspectPostgres is InspectSQLite for the database ex's connections
// resolve to; ex stays open. schema is PostgresOptions.Schema: a named
// schema that does not exist is a status with State SchemaAbsent, and
// connections resolving elsewhere fail with ErrSchemaMismatch.
func InspectPostgres(ctx context.Context, ex executor.Executor, schema string) (*SchemaStatus, error) {
	st, err := engine.InspectPostgres(ctx, ex, schema)
	return schemaStatusOf(st), userErr(err)
}

// ExpiredLeases returns running tasks whose lease has expired and that no
// claim has recovered yet, longest expired first, at most limit (0: 100).
// A worker's claim recovers them, so any that linger mean no worker has
// claimed on this database since their lease ran out. It only reads.
func (c *Client) ExpiredLeases(ctx context.Context, limit int) ([]*Task, error) {
	if err := checkCtx(ctx, "expired leases"); err != nil {
		return nil, err
	}
	return tasksResult(c.store.ExpiredLeases(ctx, limit))
}

// QueueAges returns, for each queue holding queued tasks that are due, how
// many there are and how long the longest-waiting of them has been
// claimable (by the database clock on Postgres), in queue order. Delayed
// tasks not yet due are not counted. It only reads.
func (c *Client) QueueAges(ctx context.Context) ([]QueueAge, error) {
	if err := checkCtx(ctx, "queue ages"); err != nil {
		return nil, err
	}
	ages, err := c.store.QueueAges(ctx)
	return convertAll(ages, func(a cairnqtype.QueueAge) QueueAge { return QueueAge(a) }), userErr(err)
}

// RecentFailures counts, per task name, the tasks that failed for good
// within the last window (> 0), most failures first. Attempts that failed
// and were retried are not counted. It only reads.
func (c *Client) RecentFailures(ctx context.Context, window time.Duration) ([]FailureCount, error) {
	if err := checkCtx(ctx, "recent failures"); err != nil {
		return nil, err
	}
	fs, err := c.store.RecentFailures(ctx, window)
	return convertAll(fs, func(f cairnqtype.FailureCount) FailureCount { return FailureCount(f) }), userErr(err)
}
