package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/quietlog"
	"github.com/cairnq/cairnq-go/internal/wake"
	"github.com/cairnq/cairnq-go/protocol"
)

// PostgresOptions configures a Postgres store. The zero value is the default.
type PostgresOptions struct {
	// Schema is the schema cairnq's tables live in. The store only asserts
	// that the executor's connections resolve there (an adapter opened
	// from a DSN creates the schema and sets search_path itself). Naming it
	// also confirms that a second installation beside another one in the
	// same database is intended. Default: wherever search_path resolves.
	Schema string
	// CloseExecutor makes Close close the executor too. Adapters set it for
	// executors they opened from a DSN; an application's own pool is never
	// closed by cairnq.
	CloseExecutor bool
	// Logger receives what the store survives (a listener that failed).
	// Default: quietlog's (WARN and above through slog.Default()).
	Logger *slog.Logger
	// OpenExisting opens only a database cairnq is already installed in,
	// and changes nothing about it: no ledger, table or migration is
	// created or applied. No cairnq tables where the connection resolves
	// is ErrNoDatabase (so is a named Schema that does not exist), another
	// protocol major a *ProtocolVersionMismatchError, a ledger lacking
	// migrations this SDK has ErrSchemaMismatch. Default false: create and
	// migrate as needed.
	OpenExisting bool
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// validSchemaName reports whether name is an identifier cairnq accepts as
// a schema: letters, digits and underscores, not starting with a digit, at
// most 63 bytes. Schema names are never interpolated into SQL otherwise.
func validSchemaName(name string) bool { return identifier.MatchString(name) }

// OpenPostgres opens a store on ex: it checks where the connections
// resolve and whether another installation exists elsewhere in the
// database, applies the protocol's migrations under an exclusive lock on
// the ledger, and checks the protocol version. When ex is also an
// executor.Listener, notifications wake this process's waiters and idle
// workers early (each channel is listened to only while something in this
// process waits on it); without it they poll.
func OpenPostgres(ctx context.Context, ex executor.Executor, o PostgresOptions) (*Store, error) {
	if ex == nil {
		return nil, argError("open", "executor", "is nil")
	}
	if o.Schema != "" && !validSchemaName(o.Schema) {
		return nil, argError("open", "schema", "%q is not a plain identifier", o.Schema)
	}
	o.Logger = quietlog.Or(o.Logger)
	s := &Store{
		dialect: protocol.Postgres,
		stmts:   protocol.Statements(protocol.Postgres),
		hub:     wake.NewHub(),
		now:     time.Now, // ids only: statements read the database clock
		fronts:  claimFronts{lag: frontLag},
	}
	be := &pgBackend{ex: ex, owns: o.CloseExecutor, log: o.Logger}
	s.be = be
	ok := false
	be.completer = newCompleter(s, ex)
	be.inserter = newInserter(s, ex, o.Logger)
	be.stepper = newStepper(s, ex)
	defer func() {
		if !ok {
			be.completer.Close()
			be.inserter.Close()
			be.stepper.Close()
		}
	}()
	current, err := s.checkSchema(ctx, o.Schema, o.OpenExisting)
	if err != nil {
		return nil, err
	}
	if o.OpenExisting {
		st, err := readSchemaStatus(ctx, pgQuerier{ex}, protocol.Postgres)
		if err != nil {
			return nil, fmt.Errorf("cairnq: reading the installation: %w", err)
		}
		if err := refuseStatus(st, fmt.Sprintf("schema %q", current), o.Logger); err != nil {
			return nil, err
		}
	} else if err := s.migratePostgres(ctx); err != nil {
		return nil, err
	}
	if l, isListener := ex.(executor.Listener); isListener {
		pooled := &wake.PoolerWarning{Log: o.Logger}
		s.queuedListen = wake.NewDemand(l, channelQueued, s.hub.Queued, o.Logger, pooled)
		s.doneListen = wake.NewDemand(l, channelDone, s.hub.Done, o.Logger, pooled)
		be.listeners = []*wake.Demand{s.queuedListen, s.doneListen}
	}
	s.statusReads = newStatusReader(s)
	s.stepSettles = newStepSettler(s)
	s.workflowSubmits = newWorkflowSubmitter(s)
	ok = true
	return s, nil
}

// checkSchema asserts where the connection resolves, and refuses to start
// a second installation beside an existing one unless the schema was named.
// It returns the schema the connection resolves to. existing (OpenExisting)
// makes a named schema that does not exist ErrNoDatabase.
func (s *Store) checkSchema(ctx context.Context, want string, existing bool) (string, error) {
	var current string
	var found []string
	err := s.be.read(ctx, func(q querier) error {
		var err error
		current, found, err = installations(ctx, q)
		return err
	})
	if err != nil {
		return "", err
	}
	if existing && want != "" && current == "" {
		return "", fmt.Errorf("%w: schema %q does not exist; nothing was created", cairnqtype.ErrNoDatabase, want)
	}
	return current, schemaCheck(current, found, want)
}

// installations reads where q's connection resolves (current_schema(), ""
// when no schema of its search_path exists) and every schema holding a
// cairnq_tasks table.
func installations(ctx context.Context, q querier) (current string, found []string, err error) {
	st := protocol.Statements(protocol.Postgres).Get(stmtInstallations)
	rows, err := q.query(ctx, st.SQL, nil)
	if err != nil {
		return "", nil, fmt.Errorf("cairnq: reading installations: %w", err)
	}
	for _, r := range rows {
		if c, ok, _ := asString("current_schema", r["current_schema"]); ok {
			current = c
		}
		if f, ok, _ := asString("schema", r["schema"]); ok {
			found = append(found, f)
		}
	}
	return current, found, nil
}

// schemaCheck is checkSchema's verdict on what installations read.
func schemaCheck(current string, found []string, want string) error {
	if want != "" && current != want {
		return fmt.Errorf("%w: the connection resolves to schema %q, not %q: set search_path (or open cairnq from a DSN with the schema option)",
			cairnqtype.ErrSchemaMismatch, current, want)
	}
	if want == "" && len(found) > 0 && !slices.Contains(found, current) {
		return fmt.Errorf("%w: cairnq tables exist in schema %s of this database, but this connection resolves to %q, where there are none; "+
			"connecting would create a second installation that the first never sees. Point this process at the same schema "+
			"(the schema option, or search_path), or name the schema explicitly to confirm a separate installation",
			cairnqtype.ErrSchemaMismatch, strings.Join(found, ", "), current)
	}
	return nil
}

const createLedgerPostgres = "CREATE TABLE IF NOT EXISTS cairnq_migrations (name text primary key, applied_at_ms bigint not null)"

// migratePostgres applies what the ledger lacks in one transaction holding
// an exclusive lock on the ledger, so concurrent cold starts apply each
// migration once; a database of another protocol major is refused before
// anything is applied.
func (s *Store) migratePostgres(ctx context.Context) error {
	be := s.be.(*pgBackend)
	// Concurrent CREATE TABLE IF NOT EXISTS can still collide in the
	// catalog, on the table's name (42P07, or 23505 from pg_class's index)
	// or on its row type's (42710, or 23505 from pg_type's); the loser
	// retries and finds the table.
	var err error
	for range 5 {
		if err = be.ex.Exec(ctx, createLedgerPostgres); err == nil || !isSQLState(err, "23505", "42P07", "42710") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("cairnq: creating the migration ledger: %w", outage.Mark(ctx, err))
	}
	err = be.ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		if err := sess.Exec(ctx, "LOCK TABLE cairnq_migrations IN EXCLUSIVE MODE"); err != nil {
			return err
		}
		if v, ok, err := pgProtocolVersion(ctx, sess, true); err != nil {
			return err
		} else if ok && v != protocol.ProtocolVersion {
			return &cairnqtype.ProtocolVersionMismatchError{Found: v, Supported: protocol.ProtocolVersion}
		}
		rows, err := sess.Query(ctx, "SELECT name FROM cairnq_migrations")
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, r := range rows {
			if n, ok, _ := asString("name", r["name"]); ok {
				have[n] = true
			}
		}
		for _, m := range protocol.Migrations(protocol.Postgres) {
			if have[m.Name] {
				continue
			}
			if err := sess.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := sess.Query(ctx, "INSERT INTO cairnq_migrations (name, applied_at_ms) VALUES ($1, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))", m.Name); err != nil {
				return err
			}
		}
		v, ok, err := pgProtocolVersion(ctx, sess, false)
		if err != nil {
			return err
		}
		if !ok || v != protocol.ProtocolVersion {
			return &cairnqtype.ProtocolVersionMismatchError{Found: v, Supported: protocol.ProtocolVersion}
		}
		rows, err = sess.Query(ctx, schemaVersionSQL)
		if err != nil {
			return err
		}
		warnNewerSchema(be.log, rows, "postgres")
		return nil
	})
	// The migration runs on the executor's sessions directly; a server out
	// of reach fails the open as it fails any call.
	return outage.Mark(ctx, err)
}

func pgProtocolVersion(ctx context.Context, sess executor.Session, mayBeMissing bool) (int, bool, error) {
	if mayBeMissing {
		rows, err := sess.Query(ctx, "SELECT to_regclass('cairnq_meta') IS NOT NULL AS present")
		if err != nil {
			return 0, false, err
		}
		if present, err := asBool("present", rows[0]["present"]); err != nil || !present {
			return 0, false, err
		}
	}
	st := protocol.Statements(protocol.Postgres).Get(stmtProtocolVersion)
	rows, err := sess.Query(ctx, st.SQL)
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	n, ok, err := asInt64("value", rows[0]["value"])
	return int(n), ok, err
}

// isSQLState reports whether err carries one of the SQLSTATE codes, read
// through the SQLState() method pgx's and lib/pq's errors both have.
func isSQLState(err error, codes ...string) bool {
	var se interface{ SQLState() string }
	if !errors.As(err, &se) {
		return false
	}
	return slices.Contains(codes, se.SQLState())
}

// pgBackend runs the store's statements through an executor.
type pgBackend struct {
	ex   executor.Executor
	owns bool
	log  *slog.Logger

	listeners []*wake.Demand
	completer *group.Grouper[*Completion, rowAt]
	inserter  *group.Grouper[*insertRow, rowAt]
	stepper   *group.Grouper[*stepWrite, rowAt] // durable steps
	closeOnce sync.Once
	closed    atomic.Bool
}

// pgQuerier runs the store's statements on an executor's session. It marks
// a failure that is the database out of reach (outage.Mark) whatever
// executor produced it: this module's adapters mark their own, and one
// written elsewhere need only pass its driver's error through with %w.
type pgQuerier struct{ s executor.Session }

func (q pgQuerier) query(ctx context.Context, sql string, args []any) ([]executor.Row, error) {
	rows, err := q.s.Query(ctx, sql, args...)
	return rows, outage.Mark(ctx, err)
}

func (q pgQuerier) scan(ctx context.Context, sql string, args []any) (rowSet, error) {
	if rq, ok := q.s.(executor.PositionalQuerier); ok {
		rows, err := rq.QueryPositional(ctx, sql, args...)
		if err != nil {
			return nil, outage.Mark(ctx, err)
		}
		return tableOf(rows)
	}
	rows, err := q.s.Query(ctx, sql, args...)
	return mapRows(rows), outage.Mark(ctx, err)
}

func (b *pgBackend) read(ctx context.Context, fn func(q querier) error) error {
	return b.run(ctx, func() error { return fn(pgQuerier{b.ex}) })
}

func (b *pgBackend) write(ctx context.Context, fn func(q querier) error) error {
	return b.run(ctx, func() error {
		return pgTx(ctx, b.ex, func(ctx context.Context, s executor.Session) error {
			return fn(pgQuerier{s})
		})
	})
}

// pgTx is ex.Tx. A failure of the transaction itself (BEGIN, COMMIT) that
// is the database out of reach is marked as the statements' are (see
// pgQuerier); fn's own error comes back as fn returned it.
func pgTx(ctx context.Context, ex executor.Executor, fn func(ctx context.Context, s executor.Session) error) error {
	var fnErr error
	err := ex.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		fnErr = fn(ctx, s)
		return fnErr
	})
	// Tx returns fn's error unchanged, so any other error is its own.
	if err != nil && err != fnErr {
		return outage.Mark(ctx, err)
	}
	return err
}

// writeSingle runs one statement outside an explicit transaction: Postgres
// makes a lone statement atomic by itself, and BEGIN/COMMIT would add two
// round trips.
func (b *pgBackend) writeSingle(ctx context.Context, fn func(q querier) error) error {
	return b.run(ctx, func() error { return fn(pgQuerier{b.ex}) })
}

// run runs one operation unless the store is closed. An operation that
// fails because Close closed the executor under it reports ErrClosed, as
// SQLite does, rather than the driver's own words for a closed pool.
func (b *pgBackend) run(ctx context.Context, op func() error) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if b.closed.Load() {
		return cairnqtype.ErrClosed
	}
	err := op()
	switch {
	case err == nil:
		return nil
	case b.closed.Load() && ctx.Err() == nil:
		return fmt.Errorf("%w (%v)", cairnqtype.ErrClosed, err)
	case isSQLState(err, "53100"): // disk_full
		return &cairnqtype.StorageError{Op: "write", Kind: cairnqtype.ErrStorageFull, Err: err}
	}
	return err
}

func (b *pgBackend) close() error {
	var err error
	b.closed.Store(true)
	b.closeOnce.Do(func() {
		for _, l := range b.listeners {
			l.Close()
		}
		b.completer.Close()
		b.inserter.Close()
		b.stepper.Close()
		if b.owns {
			err = b.ex.Close()
		}
	})
	return err
}

// pgArray writes a text[] literal: each element double-quoted with
// backslashes and quotes escaped, so any string survives. Every driver
// binds it as plain text, which is why arrays travel this way rather than
// as driver-specific array values.
func pgArray(v []string) string {
	return writePGArray(len(v), func(i int) (string, bool) { return v[i], true })
}

// pgArrayNullable is pgArray for values that are strings or nil; nil
// becomes an unquoted NULL element.
func pgArrayNullable(v []any) string {
	return writePGArray(len(v), func(i int) (string, bool) {
		s, ok := v[i].(string)
		return s, ok
	})
}

// writePGArray writes a text[] literal of n elements; an element whose ok
// is false is NULL. It runs on every settlement batch, so it sizes the
// literal first and copies each element in runs between the bytes that
// need a backslash; '"' and '\\' are ASCII, which never occur inside a
// multi-byte UTF-8 sequence, so bytes can be copied as they are.
func writePGArray(n int, elem func(i int) (s string, ok bool)) string {
	size := 2 + n
	for i := range n {
		s, ok := elem(i)
		size += len(s) + 2
		if !ok {
			size += len("NULL")
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		s, ok := elem(i)
		if !ok {
			b.WriteString("NULL")
			continue
		}
		b.WriteByte('"')
		for s != "" {
			j := strings.IndexAny(s, `"\`)
			if j < 0 {
				b.WriteString(s)
				break
			}
			b.WriteString(s[:j])
			b.WriteByte('\\')
			b.WriteByte(s[j])
			s = s[j+1:]
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
