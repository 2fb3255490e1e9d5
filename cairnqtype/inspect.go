package cairnqtype

import (
	"encoding/json"
	"time"
)

// What an operator reads about a database rather than about its tasks:
// how its cairnq installation compares with this SDK, and the health
// reads cairnq doctor shows.

// SchemaState says how a database's cairnq installation compares with the
// migrations this SDK carries.
type SchemaState string

// The schema states.
const (
	// SchemaAbsent: no cairnq tables (or no database at all).
	SchemaAbsent SchemaState = "absent"
	// SchemaCurrent: every migration this SDK has is applied, and none it
	// does not know.
	SchemaCurrent SchemaState = "current"
	// SchemaBehind: the ledger lacks migrations this SDK has; opening a
	// client without cairnq.Options.OpenExisting (or cairnq migrate)
	// applies them.
	SchemaBehind SchemaState = "behind"
	// SchemaAhead: a newer SDK of the same protocol major migrated the
	// database further (ledger entries or a schema_version this SDK does
	// not know). It stays usable; this SDK is the older one.
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
	return json.Marshal(struct {
		Name        string `json:"name"`
		AppliedAtMs int64  `json:"applied_at_ms"`
	}{m.Name, m.AppliedAt.UnixMilli()})
}

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

// QueueAge is how long one queue's work has waited: its queued tasks that
// are due (their run_at has come) and how long the longest-waiting of them
// has been claimable. Its JSON is {"queue", "due", "oldest_run_at_ms",
// "oldest_age_ms"}.
type QueueAge struct {
	Queue       string
	Due         int
	OldestRunAt time.Time
	// OldestAge is the database clock's now minus OldestRunAt (SQLite: this
	// process's clock).
	OldestAge time.Duration
}

// MarshalJSON writes the queue's age with times in epoch milliseconds.
func (a QueueAge) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Queue          string `json:"queue"`
		Due            int    `json:"due"`
		OldestRunAtMs  int64  `json:"oldest_run_at_ms"`
		OldestAgeMilli int64  `json:"oldest_age_ms"`
	}{a.Queue, a.Due, a.OldestRunAt.UnixMilli(), a.OldestAge.Milliseconds()})
}

// FailureCount is how many tasks of one name failed for good within a
// window, and when the last did. Its JSON is {"name", "count",
// "last_failed_at_ms"}.
type FailureCount struct {
	Name         string
	Count        int
	LastFailedAt time.Time
}

// MarshalJSON writes the count with the time in epoch milliseconds.
func (f FailureCount) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name           string `json:"name"`
		Count          int    `json:"count"`
		LastFailedAtMs int64  `json:"last_failed_at_ms"`
	}{f.Name, f.Count, f.LastFailedAt.UnixMilli()})
}
