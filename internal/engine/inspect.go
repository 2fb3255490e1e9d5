package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// This file holds what an operator reads about a database rather than its
// tasks' lifecycle: how its cairnq installation compares with this SDK
// (InspectSQLite, InspectPostgres), and the health reads cairnq doctor
// shows (ExpiredLeases, QueueAges, RecentFailures). None of it writes.

func newSchemaStatus(d protocol.Dialect) *cairnqtype.SchemaStatus {
	st := &cairnqtype.SchemaStatus{
		SDKProtocolVersion: protocol.ProtocolVersion,
		SDKSchemaVersion:   protocol.SchemaVersion,
		Migrations:         []cairnqtype.AppliedMigration{},
		Unknown:            []string{},
	}
	st.Missing = migrationNames(d)
	st.State = cairnqtype.SchemaAbsent
	return st
}

func migrationNames(d protocol.Dialect) []string {
	ms := protocol.Migrations(d)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return names
}

// The reads behind a SchemaStatus, the same text on both dialects once the
// tables are known to exist.
const (
	metaVersionsSQL = "SELECT key, value FROM cairnq_meta WHERE key IN ('protocol_version', 'schema_version')"
	ledgerSQL       = "SELECT name, applied_at_ms FROM cairnq_migrations ORDER BY name"
	sqliteTablesSQL = "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('cairnq_tasks', 'cairnq_meta', 'cairnq_migrations')"
	pgTablesSQL     = "SELECT to_regclass('cairnq_tasks') IS NOT NULL AS cairnq_tasks, " +
		"to_regclass('cairnq_meta') IS NOT NULL AS cairnq_meta, " +
		"to_regclass('cairnq_migrations') IS NOT NULL AS cairnq_migrations"
)

// readSchemaStatus reads the installation through q with plain reads:
// which of cairnq's tables exist, cairnq_meta's versions and the ledger.
func readSchemaStatus(ctx context.Context, q querier, d protocol.Dialect) (*cairnqtype.SchemaStatus, error) {
	st := newSchemaStatus(d)
	tables := map[string]bool{}
	if d == protocol.SQLite {
		rows, err := q.query(ctx, sqliteTablesSQL, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if n, ok, _ := asString("name", r["name"]); ok {
				tables[n] = true
			}
		}
	} else {
		rows, err := q.query(ctx, pgTablesSQL, nil)
		if err != nil {
			return nil, err
		}
		for _, name := range []string{"cairnq_tasks", "cairnq_meta", "cairnq_migrations"} {
			if len(rows) > 0 {
				present, err := asBool(name, rows[0][name])
				if err != nil {
					return nil, err
				}
				tables[name] = present
			}
		}
	}
	if !tables["cairnq_tasks"] && !tables["cairnq_meta"] {
		return st, nil
	}
	if tables["cairnq_meta"] {
		rows, err := q.query(ctx, metaVersionsSQL, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			k, _, _ := asString("key", r["key"])
			v, _, err := asInt64("value", r["value"])
			if err != nil {
				return nil, err
			}
			switch k {
			case "protocol_version":
				st.ProtocolVersion = int(v)
			case "schema_version":
				st.SchemaVersion = int(v)
			}
		}
	}
	compatible := st.ProtocolVersion == protocol.ProtocolVersion
	if tables["cairnq_migrations"] {
		rows, err := q.query(ctx, ledgerSQL, nil)
		// Another protocol major may shape its ledger otherwise: what it
		// holds is reported when it can be read, and never blocks the verdict.
		if err != nil && compatible {
			return nil, err
		}
		for _, r := range rows {
			name, _, err := asString("name", r["name"])
			if err != nil {
				return nil, err
			}
			at, _, err := asInt64("applied_at_ms", r["applied_at_ms"])
			if err != nil {
				return nil, err
			}
			st.Migrations = append(st.Migrations, cairnqtype.AppliedMigration{Name: name, AppliedAt: time.UnixMilli(at)})
		}
	}
	have := map[string]bool{}
	for _, m := range st.Migrations {
		have[m.Name] = true
	}
	known := migrationNames(d)
	st.Missing = slices.DeleteFunc(slices.Clone(known), func(n string) bool { return have[n] })
	for _, m := range st.Migrations {
		if !slices.Contains(known, m.Name) {
			st.Unknown = append(st.Unknown, m.Name)
		}
	}
	switch {
	case !compatible:
		st.State = cairnqtype.SchemaIncompatible
	case len(st.Missing) > 0:
		st.State = cairnqtype.SchemaBehind
	case len(st.Unknown) > 0 || st.SchemaVersion > protocol.SchemaVersion:
		st.State = cairnqtype.SchemaAhead
	default:
		st.State = cairnqtype.SchemaCurrent
	}
	return st, nil
}

// refuseStatus is what a store opened with OpenExisting makes of the
// installation it found: an error for every state it must not run on, nil
// (with a warning when this SDK is the older one) otherwise. where names
// the database in messages.
func refuseStatus(st *cairnqtype.SchemaStatus, where string, log *slog.Logger) error {
	switch st.State {
	case cairnqtype.SchemaAbsent:
		return fmt.Errorf("%w: %s holds no cairnq tables; nothing was created", cairnqtype.ErrNoDatabase, where)
	case cairnqtype.SchemaIncompatible:
		return &cairnqtype.ProtocolVersionMismatchError{Found: st.ProtocolVersion, Supported: protocol.ProtocolVersion}
	case cairnqtype.SchemaBehind:
		return fmt.Errorf("%w: %s lacks migrations %s that this SDK relies on; nothing was changed: "+
			"migrate it first (cairnq migrate, or a client opened without OpenExisting)",
			cairnqtype.ErrSchemaMismatch, where, strings.Join(st.Missing, ", "))
	case cairnqtype.SchemaAhead:
		log.Warn("cairnq: the database's schema is newer than this SDK's; upgrade this process's cairnq",
			"database", where, "schema_version", st.SchemaVersion, "sdk_schema_version", protocol.SchemaVersion,
			"unknown_migrations", st.Unknown)
	}
	return nil
}

// InspectSQLite reports the cairnq installation of the SQLite database at
// path without creating or changing anything: a missing file (or an
// in-memory path) is a status with State SchemaAbsent, and no file or
// directory is made. A file that is not a SQLite database is an
// *OpenError wrapping ErrNotADatabase.
func InspectSQLite(ctx context.Context, path string) (*cairnqtype.SchemaStatus, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, argError("inspect", "path", "is empty")
	}
	if isMemoryPath(path) {
		return newSchemaStatus(protocol.SQLite), nil
	}
	uri, exists, err := existingSQLiteURI(path)
	if err != nil {
		return nil, &cairnqtype.OpenError{Path: path, Err: err}
	}
	if !exists {
		return newSchemaStatus(protocol.SQLite), nil
	}
	const busy = 5 * time.Second
	c, _, err := openExisting(ctx, uri)
	if err != nil {
		// A plain path was found to exist; a URI can only tell by opening.
		if errors.Is(err, sqlite3.CANTOPEN) && strings.HasPrefix(path, "file:") {
			return newSchemaStatus(protocol.SQLite), nil
		}
		return nil, sqliteOpenError(path, busy, err)
	}
	conn := &sqliteConn{c: c, stmts: map[string]*preparedStmt{}}
	defer conn.close()
	if err := c.BusyTimeout(busy); err != nil {
		return nil, sqliteOpenError(path, busy, err)
	}
	st, err := readSchemaStatus(ctx, sqliteQuerier{conn}, protocol.SQLite)
	if err != nil {
		return nil, sqliteOpenError(path, busy, err)
	}
	return st, nil
}

// openExisting opens the database uri (from existingSQLiteURI) names,
// for reading only when this process may not write it (no permission, or
// a read-only file system): mode=ro, and if
// even that cannot be read (in WAL mode a reader needs the -shm file, which
// a directory it may not write keeps it from making) immutable=1, which
// reads the file as a snapshot nothing else changes, as a backup or a
// copy of a database is, unless a write-ahead log holds commits the file
// does not (ErrStorageReadOnly then). It returns the URI the connection
// was opened with.
func openExisting(ctx context.Context, uri string) (*sqlite3.Conn, string, error) {
	c, err := sqlite3.OpenContext(ctx, uri)
	if err == nil || !(errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS)) {
		return c, uri, err
	}
	for _, params := range [][2]string{{"mode", "ro"}, {"immutable", "1"}} {
		u, perr := url.Parse(uri)
		if perr != nil {
			return nil, uri, err
		}
		if params[0] == "immutable" && hasWAL(u.Path) {
			// immutable reads the main file alone: with commits still in
			// the write-ahead log, which a live database has, that is an
			// older database than the one there is.
			return nil, uri, fmt.Errorf("%w: %s-wal holds commits this process could read only by sharing the "+
				"database's -shm file, which it may not create in that directory; read a copy, or give it write "+
				"access to the directory", cairnqtype.ErrStorageReadOnly, u.Path)
		}
		q := u.Query()
		q.Set(params[0], params[1])
		q.Set("mode", "ro")
		u.RawQuery = q.Encode()
		uri = u.String()
		c, err = sqlite3.OpenContext(ctx, uri)
		if err != nil {
			return nil, uri, err
		}
		// Opening reads nothing yet: read once, where a missing -shm shows.
		if err = c.Exec("SELECT count(*) FROM sqlite_schema"); err == nil {
			return c, uri, nil
		}
		_ = c.Close()
		if !errors.Is(err, sqlite3.READONLY) && !errors.Is(err, sqlite3.CANTOPEN) {
			return nil, uri, err
		}
	}
	return nil, uri, err
}

// hasWAL reports whether the database at path has a write-ahead log with
// anything in it.
func hasWAL(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return err == nil && fi.Size() > 0
}

// existingSQLiteURI returns the URI that opens path only if it exists
// (mode=rw: SQLite creates nothing), and whether it exists. A plain path is
// looked at first; a "file:" URI gets mode=rw unless it names a mode other
// than rwc, and is reported as existing (opening it tells).
func existingSQLiteURI(path string) (uri string, exists bool, err error) {
	if strings.HasPrefix(path, "file:") {
		u, err := url.Parse(path)
		if err != nil {
			return "", false, err
		}
		q := u.Query()
		switch q.Get("mode") {
		case "memory":
			return "", false, nil
		case "", "rwc":
			q.Set("mode", "rw")
		}
		u.RawQuery = q.Encode()
		return u.String(), true, nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, err
	case fi.IsDir():
		return "", false, fmt.Errorf("%s is a directory", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false, err
	}
	escape := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + escape.Replace(filepath.ToSlash(abs)) + "?mode=rw", true, nil
}

// InspectPostgres reports the cairnq installation ex's connections
// resolve to, without creating or changing anything; ex stays open. schema,
// when set, is PostgresOptions.Schema: a schema that does not exist is a
// status with State SchemaAbsent, and connections resolving elsewhere are
// ErrSchemaMismatch, as is a database whose cairnq tables live only in
// another schema while schema is "".
func InspectPostgres(ctx context.Context, ex executor.Executor, schema string) (*cairnqtype.SchemaStatus, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if ex == nil {
		return nil, argError("inspect", "executor", "is nil")
	}
	if schema != "" && !validSchemaName(schema) {
		return nil, argError("inspect", "schema", "%q is not a plain identifier", schema)
	}
	q := pgQuerier{ex}
	current, found, err := installations(ctx, q)
	if err != nil {
		return nil, err
	}
	if schema != "" && current == "" {
		st := newSchemaStatus(protocol.Postgres)
		st.Schema = schema
		return st, nil
	}
	if err := schemaCheck(current, found, schema); err != nil {
		return nil, err
	}
	st, err := readSchemaStatus(ctx, q, protocol.Postgres)
	if err != nil {
		return nil, err
	}
	st.Schema = current
	return st, nil
}

// ---------------------------------------------------------------- health

// DefaultExpiredLeasesLimit is how many tasks ExpiredLeases returns when
// its limit is 0.
const DefaultExpiredLeasesLimit = 100

// ExpiredLeases returns running tasks whose lease has expired and that no
// claim has recovered yet, longest expired first, at most limit (0:
// DefaultExpiredLeasesLimit). Claims recover such tasks, so any that
// linger mean no worker has claimed on the database since. It only reads.
func (s *Store) ExpiredLeases(ctx context.Context, limit int) ([]*cairnqtype.Task, error) {
	if limit < 0 {
		return nil, argError("expired leases", "limit", "must be >= 0, got %d", limit)
	}
	if limit == 0 {
		limit = DefaultExpiredLeasesLimit
	}
	rows, err := s.readOne(ctx, stmtExpiredLeases, protocol.Args{"limit": int64(limit)})
	if err != nil {
		return nil, err
	}
	return rowsToTasks(rows)
}

// QueueAges returns, for every queue holding due queued tasks, how many
// there are and how long the longest-waiting has been claimable, in queue
// order. Delayed tasks not yet due are not counted. It only reads.
func (s *Store) QueueAges(ctx context.Context) ([]cairnqtype.QueueAge, error) {
	rows, err := s.readOne(ctx, stmtQueueAges, protocol.Args{})
	if err != nil {
		return nil, err
	}
	out := make([]cairnqtype.QueueAge, 0, len(rows))
	for _, r := range rows {
		q, _, err := asString("queue", r["queue"])
		if err != nil {
			return nil, err
		}
		due, _, err := asInt64("due", r["due"])
		if err != nil {
			return nil, err
		}
		oldest, _, err := asInt64("oldest_run_at_ms", r["oldest_run_at_ms"])
		if err != nil {
			return nil, err
		}
		age, _, err := asInt64("oldest_age_ms", r["oldest_age_ms"])
		if err != nil {
			return nil, err
		}
		out = append(out, cairnqtype.QueueAge{Queue: q, Due: int(due), OldestRunAt: time.UnixMilli(oldest), OldestAge: time.Duration(age) * time.Millisecond})
	}
	return out, nil
}

// RecentFailures counts, per task name, the tasks that failed for good
// (status failed) within the last window, most failures first. Failed
// attempts that were retried are not counted. It only reads.
func (s *Store) RecentFailures(ctx context.Context, window time.Duration) ([]cairnqtype.FailureCount, error) {
	if window <= 0 {
		return nil, argError("recent failures", "window", "must be > 0, got %v", window)
	}
	rows, err := s.readOne(ctx, stmtRecentFailures, protocol.Args{"older_than_ms": ms(window)})
	if err != nil {
		return nil, err
	}
	out := make([]cairnqtype.FailureCount, 0, len(rows))
	for _, r := range rows {
		name, _, err := asString("name", r["name"])
		if err != nil {
			return nil, err
		}
		n, _, err := asInt64("count", r["count"])
		if err != nil {
			return nil, err
		}
		last, _, err := asInt64("last_failed_at_ms", r["last_failed_at_ms"])
		if err != nil {
			return nil, err
		}
		out = append(out, cairnqtype.FailureCount{Name: name, Count: int(n), LastFailedAt: time.UnixMilli(last)})
	}
	return out, nil
}
