package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/quietlog"
	"github.com/cairnq/cairnq-go/internal/wake"
	"github.com/cairnq/cairnq-go/protocol"
)

// SQLiteOptions configures a SQLite store. The zero value is the default.
type SQLiteOptions struct {
	// BusyTimeout is how long a write waits, with backoff, for another
	// process to release the database's write lock before failing with
	// ErrBusy. Default 5s.
	BusyTimeout time.Duration
	// FullSync sets synchronous=FULL: every commit survives a power cut.
	// Default false: synchronous=NORMAL, which in WAL mode loses nothing on
	// an application crash and may lose the last commits on a power cut
	// (what the TypeScript SDK runs).
	FullSync bool
	// ReadConns is the number of read connections. Default 4. WAL readers
	// never wait for the writer.
	ReadConns int
	// MaxBatch caps how many waiting writes share one transaction. Default 256.
	MaxBatch int
	// Logger receives what the store survives (a failed statistics refresh).
	// Default: quietlog's (WARN and above through slog.Default()).
	Logger *slog.Logger
	// AllowOtherTables lets the store add cairnq's tables to a database
	// that already holds other tables but no cairnq ones. Default false:
	// such a database is refused with ErrForeignDatabase and left as it was.
	AllowOtherTables bool
	// OpenExisting opens only a database cairnq is already installed in,
	// and changes nothing about it: no file or directory is created (the
	// file is opened with mode=rw), no migration is applied, the journal
	// mode is left as it is, and the planner statistics are not refreshed.
	// A missing file, or one without cairnq tables, is ErrNoDatabase;
	// another protocol major a *ProtocolVersionMismatchError; a ledger
	// lacking migrations this SDK has ErrSchemaMismatch. Default false:
	// create and migrate as needed.
	OpenExisting bool

	// memoryLimit, when set, replaces sqliteMaxMemory: tests exhaust a
	// connection's memory with it.
	memoryLimit int64
}

// sqliteMaxMemory caps each connection's memory: the embedded SQLite runs
// in a WebAssembly sandbox whose memory is reserved as address space and
// committed only as used, and whose default cap (256 MB) a few values near
// MaxValueBytes exhaust within one statement (a claim's RETURNING holds
// every row it returns). 4 GB is the sandbox's own ceiling.
const sqliteMaxMemory = 4 << 30

const (
	statsRefreshInterval = time.Minute
	walSwitchBudget      = 5 * time.Second
)

// sqliteBackend owns the connections to one SQLite database. One goroutine,
// the writer, owns the write connection; writes queue to it and everything
// waiting runs in one BEGIN IMMEDIATE ... COMMIT (group commit), each
// request in its own savepoint so a failing request fails only its caller.
// Reads use a small pool of their own connections.
type sqliteBackend struct {
	path    string
	dsn     string // what connections open: path, or its mode=rw URI under OpenExisting
	memory  bool
	busy    time.Duration
	log     *slog.Logger
	reqs    chan *writeReq
	readers chan *sqliteConn
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once

	maxBatch    int
	allowOther  bool
	existing    bool // OpenExisting: create, migrate and maintain nothing
	memoryLimit int64
	sync        string // the synchronous pragma every connection gets
	settler     sqliteSettler
	w           *sqliteConn // the writer goroutine's, and only its; nil after a reset that could not reopen

	commits atomic.Int64  // transactions committed by the writer
	guard   *fileGuard    // whether the path still names the file; nil in memory (sqlite_identity.go)
	ckpt    *checkpointer // nil for an in-memory database

	// The cross-process watch (sqlite_notify.go): nil for an in-memory
	// database or with CAIRNQ_SQLITE_NOTIFY=0.
	wal    *walNotifier
	notify *wake.Demand
}

// writeReq is one caller's unit of work for the writer.
type writeReq struct {
	ctx  context.Context
	fn   func(q querier) error
	done chan error
	// single marks a request of exactly one statement. SQLite undoes a
	// failed statement by itself, leaving the transaction intact, so such
	// a request needs no savepoint of its own inside a shared transaction.
	single bool
	// completion marks a Complete (fn runs it alone). The completions of
	// one transaction run together, as one complete_many statement.
	completion *Completion
	// state settles the race between a caller giving up and the writer
	// starting the request (group.Ticket).
	state group.Ticket
}

// sqliteSettler runs completions on the writer's connection: the Store,
// which owns the statements and the clock.
type sqliteSettler interface {
	// completeMany settles cs, whose ids are distinct, with one
	// statement, setting each one's status or err. An error means the
	// statement failed as a whole and took no effect (or SQLite tore the
	// transaction down).
	completeMany(q querier, cs []*Completion) error
}

// querier runs compiled protocol statements (or plain SQL) on one
// connection or transaction.
type querier interface {
	query(ctx context.Context, sql string, args []any) ([]executor.Row, error)
	// scan is query for the statements that run once per task: the same
	// rows, read by position where the connection allows it.
	scan(ctx context.Context, sql string, args []any) (rowSet, error)
}

type sqliteQuerier struct{ c *sqliteConn }

func (q sqliteQuerier) query(_ context.Context, sql string, args []any) ([]executor.Row, error) {
	return q.c.query(sql, args)
}

func (q sqliteQuerier) scan(_ context.Context, sql string, args []any) (rowSet, error) {
	t, err := q.c.scan(sql, args)
	if err != nil {
		return nil, err // not a nil *table in a non-nil rowSet
	}
	return t, nil
}

func isMemoryPath(path string) bool {
	return path == ":memory:" || strings.Contains(path, "mode=memory")
}

func openSQLiteBackend(ctx context.Context, path string, o SQLiteOptions) (*sqliteBackend, error) {
	if path == "" {
		return nil, argError("open", "path", "is empty (use \":memory:\" for an in-memory database)")
	}
	if o.BusyTimeout < 0 {
		return nil, argError("open", "BusyTimeout", "must be >= 0 (0 for the default %v), got %v", defaultBusyTimeout, o.BusyTimeout)
	}
	b := &sqliteBackend{
		path:        path,
		dsn:         path,
		memory:      isMemoryPath(path),
		busy:        o.BusyTimeout,
		log:         o.Logger,
		reqs:        make(chan *writeReq, 1024),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		maxBatch:    o.MaxBatch,
		allowOther:  o.AllowOtherTables,
		existing:    o.OpenExisting,
		memoryLimit: o.memoryLimit,
	}
	if b.memoryLimit <= 0 {
		b.memoryLimit = sqliteMaxMemory
	}
	if b.busy == 0 {
		b.busy = defaultBusyTimeout
	}
	b.log = quietlog.Or(b.log)
	if b.maxBatch <= 0 {
		b.maxBatch = 256
	}
	nread := o.ReadConns
	if nread <= 0 {
		nread = 4
	}
	if err := b.locate(ctx); err != nil {
		return nil, err
	}
	b.sync = "NORMAL"
	if o.FullSync {
		b.sync = "FULL"
	}
	w, err := b.openConn(ctx)
	if err != nil {
		return nil, err
	}
	b.w = w
	if b.existing {
		if err := b.verifyExisting(ctx); err != nil {
			w.close()
			return nil, err
		}
	} else {
		if err := b.migrate(); err != nil {
			w.close()
			return nil, err
		}
		if err := b.refreshStatistics(); err != nil && !errors.Is(err, sqlite3.BUSY) {
			w.close()
			return nil, &cairnqtype.OpenError{Path: path, Err: err}
		}
	}
	if !b.memory {
		b.readers = make(chan *sqliteConn, nread)
		for range nread {
			r, err := b.openConn(ctx)
			if err != nil {
				b.closeReaders()
				w.close()
				return nil, err
			}
			b.readers <- r
		}
	}
	if !b.memory {
		b.guard = b.newFileGuard(w)
		b.ckpt = newCheckpointer(b)
		w.c.WALHook(b.ckpt.walHook)
	}
	go b.writer()
	return b, nil
}

// locate makes ready what b opens: under OpenExisting, the URI of a file
// that must be there (read-only when this process may only read it);
// otherwise the file's directory.
func (b *sqliteBackend) locate(ctx context.Context) error {
	path := b.path
	switch {
	case b.existing && !b.memory:
		uri, exists, err := existingSQLiteURI(path)
		if err != nil {
			return &cairnqtype.OpenError{Path: path, Err: err}
		}
		if !exists {
			return &cairnqtype.OpenError{Path: path, Err: fmt.Errorf("%w: the file does not exist; nothing was created", cairnqtype.ErrNoDatabase)}
		}
		b.dsn = uri
		// A file this process may only read is opened for reading, every
		// connection alike (the first open finds out how).
		c, ro, err := openExisting(ctx, uri)
		if errors.Is(err, cairnqtype.ErrStorageReadOnly) {
			return &cairnqtype.OpenError{Path: path, Err: err}
		}
		if err == nil {
			_ = c.Close()
			b.dsn = ro
		}
	case !b.memory && !strings.HasPrefix(path, "file:"):
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return &cairnqtype.OpenError{Path: path, Err: err}
		}
	}
	return nil
}

// openConn opens and configures one connection.
func (b *sqliteBackend) openConn(ctx context.Context) (*sqliteConn, error) {
	c, err := sqlite3.OpenContext(sqlite3.WithMaxMemory(ctx, b.memoryLimit), b.dsn)
	if err != nil {
		if b.existing && errors.Is(err, sqlite3.CANTOPEN) && !errors.Is(err, os.ErrPermission) && !errors.Is(err, syscall.EROFS) { // mode=rw on a file that is not there
			return nil, &cairnqtype.OpenError{Path: b.path, Err: fmt.Errorf("%w: %v; nothing was created", cairnqtype.ErrNoDatabase, err)}
		}
		return nil, b.openError(err)
	}
	conn := &sqliteConn{c: c, stmts: map[string]*preparedStmt{}}
	fail := func(err error) (*sqliteConn, error) {
		conn.close()
		return nil, b.openError(err)
	}
	if err := c.BusyHandler(b.busyHandler()); err != nil {
		return fail(err)
	}
	if !b.memory && !b.existing {
		if err := b.enableWAL(c); err != nil {
			return fail(err)
		}
	}
	if err := c.Exec("PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; PRAGMA synchronous = " + b.sync); err != nil {
		return fail(err)
	}
	return conn, nil
}

// openWriter opens a connection to replace the writer's.
func (b *sqliteBackend) openWriter() (*sqliteConn, error) {
	w, err := b.openConn(context.Background())
	if err == nil && b.ckpt != nil {
		w.c.WALHook(b.ckpt.walHook)
	}
	return w, err
}

func (b *sqliteBackend) openError(err error) error { return sqliteOpenError(b.path, b.busy, err) }

// sqliteOpenError classifies an error opening or preparing the database at
// path: not a database, locked past busy, or anything else.
func sqliteOpenError(path string, busy time.Duration, err error) error {
	switch {
	case errors.Is(err, sqlite3.NOTADB):
		return &cairnqtype.OpenError{Path: path, Err: fmt.Errorf("%w: %v", cairnqtype.ErrNotADatabase, err)}
	case errors.Is(err, sqlite3.BUSY):
		return &cairnqtype.OpenError{Path: path, Err: &cairnqtype.BusyError{Timeout: busy, Err: err}}
	}
	return &cairnqtype.OpenError{Path: path, Err: err}
}

// verifyExisting is migrate for a store opened with OpenExisting: it reads
// the installation, in one read transaction, and refuses what it must not
// run on. It writes nothing.
func (b *sqliteBackend) verifyExisting(ctx context.Context) error {
	c := b.w
	if err := c.exec("BEGIN"); err != nil {
		return b.openError(err)
	}
	st, err := readSchemaStatus(ctx, sqliteQuerier{c}, protocol.SQLite)
	if !c.c.GetAutocommit() {
		c.exec("ROLLBACK")
	}
	if err != nil {
		return b.openError(err)
	}
	if st.State == cairnqtype.SchemaAbsent {
		return &cairnqtype.OpenError{Path: b.path, Err: fmt.Errorf("%w: the file holds no cairnq tables; nothing was created", cairnqtype.ErrNoDatabase)}
	}
	return refuseStatus(st, b.path, b.log)
}

// busyHandler returns a connection's busy handler: SQLite calls it while
// another connection holds the lock this one needs, and it sleeps in
// growing, jittered steps (1ms doubling to 50ms) until the busy timeout,
// measured on the clock, is spent. SQLite calls it only from the goroutine
// using the connection, so the start time needs no lock.
func (b *sqliteBackend) busyHandler() func(ctx context.Context, count int) bool {
	var start time.Time
	return func(ctx context.Context, count int) bool {
		if count == 0 {
			start = time.Now()
		}
		left := b.busy - time.Since(start)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		step := min(time.Millisecond<<min(count, 6), 50*time.Millisecond, left)
		time.Sleep(step/2 + rand.N(step/2+1))
		return true
	}
}

// enableWAL switches the file to WAL. Only the first connection of a new
// database really switches, and that needs an exclusive lock SQLite does
// not wait for through the busy handler, so a concurrent cold start is
// retried here.
func (b *sqliteBackend) enableWAL(c *sqlite3.Conn) error {
	deadline := time.Now().Add(walSwitchBudget)
	for {
		stmt, _, err := c.Prepare("PRAGMA journal_mode = WAL")
		if err != nil {
			if !errors.Is(err, sqlite3.BUSY) || time.Now().After(deadline) {
				return err
			}
		} else {
			mode := ""
			if stmt.Step() {
				mode = stmt.ColumnText(0)
			}
			err = stmt.Err()
			stmt.Close()
			if err == nil && strings.EqualFold(mode, "wal") {
				return nil
			}
			if err != nil && !errors.Is(err, sqlite3.BUSY) {
				return err
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = fmt.Errorf("journal_mode stayed %q", mode)
				}
				return fmt.Errorf("cannot switch to WAL: %w", err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// migrate applies the protocol's migrations and checks the protocol version,
// all under one BEGIN IMMEDIATE, so two processes cold-starting together
// cannot both apply one migration, and a database of another protocol major
// is refused before anything is written to it.
func (b *sqliteBackend) migrate() error {
	c := b.w
	if err := c.exec("BEGIN IMMEDIATE"); err != nil {
		return b.openError(err)
	}
	err := b.migrateLocked()
	if err != nil {
		if !c.c.GetAutocommit() {
			c.exec("ROLLBACK")
		}
		return err
	}
	if err := c.exec("COMMIT"); err != nil {
		c.exec("ROLLBACK")
		return b.openError(err)
	}
	return nil
}

func (b *sqliteBackend) migrateLocked() error {
	c := b.w
	// A database some other protocol major made must be left untouched, so
	// its version is read before any migration runs.
	if v, ok, err := readProtocolVersion(c, true); err != nil {
		return b.openError(err)
	} else if ok && v != protocol.ProtocolVersion {
		return &cairnqtype.ProtocolVersionMismatchError{Found: v, Supported: protocol.ProtocolVersion}
	}
	if err := b.refuseForeign(); err != nil {
		return err
	}
	if err := c.exec(createLedgerSQLite); err != nil {
		return b.openError(err)
	}
	applied, err := c.query("SELECT name FROM cairnq_migrations", nil)
	if err != nil {
		return b.openError(err)
	}
	have := make(map[string]bool, len(applied))
	for _, r := range applied {
		if s, ok := r["name"].(string); ok {
			have[s] = true
		}
	}
	for _, m := range protocol.Migrations(protocol.SQLite) {
		if have[m.Name] {
			continue
		}
		if err := c.c.Exec(m.SQL); err != nil {
			return b.openError(fmt.Errorf("migration %s: %w", m.Name, err))
		}
		if _, err := c.query("INSERT INTO cairnq_migrations (name, applied_at_ms) VALUES (?1, ?2)",
			[]any{m.Name, time.Now().UnixMilli()}); err != nil {
			return b.openError(err)
		}
	}
	v, ok, err := readProtocolVersion(c, false)
	if err != nil {
		return b.openError(err)
	}
	if !ok || v != protocol.ProtocolVersion {
		return &cairnqtype.ProtocolVersionMismatchError{Found: v, Supported: protocol.ProtocolVersion}
	}
	rows, err := c.query(schemaVersionSQL, nil)
	if err != nil {
		return b.openError(err)
	}
	warnNewerSchema(b.log, rows, b.path)
	return nil
}

// refuseForeign refuses to add cairnq's tables to a database that holds
// another application's tables and no cairnq ledger, unless told to
// (SQLiteOptions.AllowOtherTables): a mistyped path should not quietly
// graft a task queue onto someone else's data.
func (b *sqliteBackend) refuseForeign() error {
	if b.allowOther {
		return nil
	}
	rows, err := b.w.query(`SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name NOT LIKE 'cairnq\_%' ESCAPE '\'
		AND NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN ('cairnq_migrations', 'cairnq_meta'))
		ORDER BY name LIMIT 5`, nil)
	if err != nil {
		return b.openError(err)
	}
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		n, _, _ := asString("name", r["name"])
		names = append(names, n)
	}
	return &cairnqtype.OpenError{Path: b.path, Err: fmt.Errorf("%w: it holds other tables (%s) and no cairnq tables; "+
		"set AllowOtherTables to add cairnq's tables beside them", cairnqtype.ErrForeignDatabase, strings.Join(names, ", "))}
}

// The ledger every SDK shares: a migration's file name and when it ran.
const createLedgerSQLite = "CREATE TABLE IF NOT EXISTS cairnq_migrations (name text primary key, applied_at_ms integer not null)"

// readProtocolVersion reads cairnq_meta's protocol_version. ok is false when
// the database has no cairnq_meta (or no such row) yet.
func readProtocolVersion(c *sqliteConn, mayBeMissing bool) (int, bool, error) {
	if mayBeMissing {
		rows, err := c.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cairnq_meta'", nil)
		if err != nil || len(rows) == 0 {
			return 0, false, err
		}
	}
	st := protocol.Statements(protocol.SQLite).Get(stmtProtocolVersion)
	rows, err := c.query(st.SQL, nil)
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	n, ok, err := asInt64("value", rows[0]["value"])
	return int(n), ok, err
}

// refreshStatistics gives the planner statistics for cairnq_tasks: an
// explicit ANALYZE the first time (before SQLite 3.46, PRAGMA optimize never
// creates the first ones), PRAGMA optimize after that, which re-analyzes
// only when the table has changed enough to matter.
func (b *sqliteBackend) refreshStatistics() error {
	c := b.w
	rows, err := c.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'", nil)
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		rows, err = c.query("SELECT 1 FROM sqlite_stat1 WHERE tbl = 'cairnq_tasks' LIMIT 1", nil)
		if err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		return c.c.Exec("ANALYZE cairnq_tasks")
	}
	return c.c.Exec("PRAGMA optimize")
}

// read runs fn on a read connection. An in-memory database has only the
// writer's connection, so its reads queue there.
func (b *sqliteBackend) read(ctx context.Context, fn func(q querier) error) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := b.guard.checkSoon(); err != nil {
		return err
	}
	if b.memory {
		return b.submit(ctx, fn, false)
	}
	select {
	case c := <-b.readers:
		return b.readOn(ctx, c, fn)
	case <-b.quit:
		return cairnqtype.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readOn runs fn on the read connection c and returns c to the pool. A
// connection that panicked (the driver panics when SQLite runs out of
// memory) is in no known state: it is closed, and a fresh one takes its
// place in the pool (nil, opened on next use, if that fails now).
func (b *sqliteBackend) readOn(ctx context.Context, c *sqliteConn, fn func(q querier) error) (err error) {
	if c == nil {
		if c, err = b.openConn(ctx); err != nil {
			b.readers <- nil
			return err
		}
	}
	defer func() {
		p := recover()
		if p == nil {
			b.readers <- c
			return
		}
		err = panicError("read", p)
		c.closeAfterPanic()
		fresh, oerr := b.openConn(context.WithoutCancel(ctx))
		if oerr != nil {
			b.log.Warn("cairnq: reopening a SQLite read connection after a fault", "err", oerr)
		}
		b.readers <- fresh // nil when it failed: opened on next use
	}()
	return fn(sqliteQuerier{c})
}

// panicError turns what the driver (or a caller's function) panicked with
// into an error; SQLite running out of memory is a *StorageError.
func panicError(op string, p any) error {
	err, ok := p.(error)
	if !ok {
		return fmt.Errorf("cairnq: panic in %s: %v", op, p)
	}
	if errors.Is(err, sqlite3.NOMEM) || strings.Contains(err.Error(), "out of memory") {
		return &cairnqtype.StorageError{Op: op, Err: err, Kind: cairnqtype.ErrStorageMemory}
	}
	return fmt.Errorf("cairnq: panic in %s: %w", op, err)
}

// writeError classifies a failed write: a lock held past the busy timeout
// is a *BusyError, a full disk a *StorageError. SQLite reports a full disk
// as FULL, or as an I/O error whose system error is ENOSPC; the driver's
// VFS (ncruces/go-sqlite3 v0.37) reports ENOSPC from a write as a bare
// IOERR_WRITE, having compared the *os.PathError it got with an errno, so
// for that code the file system is asked how much room is left.
func (b *sqliteBackend) writeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sqlite3.BUSY):
		return &cairnqtype.BusyError{Timeout: b.busy, Err: err}
	case errors.Is(err, sqlite3.FULL) || errors.Is(err, syscall.ENOSPC):
		return &cairnqtype.StorageError{Op: "write", Kind: cairnqtype.ErrStorageFull, Err: err}
	case errors.Is(err, sqlite3.READONLY):
		return &cairnqtype.StorageError{Op: "write", Kind: cairnqtype.ErrStorageReadOnly, Err: err}
	case errors.Is(err, sqlite3.IOERR_WRITE) && b.nearlyFull():
		return &cairnqtype.StorageError{Op: "write", Kind: cairnqtype.ErrStorageFull, Err: fmt.Errorf("%w (the file system holds under %d KiB free)", err, fullBelow>>10)}
	}
	return err
}

// defaultBusyTimeout is how long a write waits for another process's
// write lock when SQLiteOptions.BusyTimeout is 0.
const defaultBusyTimeout = 5 * time.Second

// fullBelow is the free space under which a file system that failed a
// write counts as full. SQLite writes a page (a WAL frame) at a time, so a
// write that ran out of room leaves less than a few pages free; a write
// failing with room to spare is another I/O error.
const fullBelow = 1 << 20

// nearlyFull reports whether the file system holding the database has
// under fullBelow bytes free for this process.
func (b *sqliteBackend) nearlyFull() bool {
	if b.memory {
		return false
	}
	path := b.path
	if p, err := sqliteFilePath(b.w); err == nil && p != "" {
		path = p
	}
	free, ok := freeBytes(filepath.Dir(path))
	return ok && free < fullBelow
}

func (b *sqliteBackend) closeReaders() {
	if b.readers == nil {
		return
	}
	for {
		select {
		case c := <-b.readers:
			if c != nil {
				c.close()
			}
		default:
			return
		}
	}
}

// close stops the writer and closes every connection. Reads in flight
// finish first; their connections are closed as they come back.
func (b *sqliteBackend) close() error {
	var err error
	b.once.Do(func() {
		b.notify.Close()
		close(b.quit)
		<-b.done
		if b.ckpt != nil {
			b.ckpt.stop()
		}
		if b.w != nil {
			err = b.w.close()
		}
		if b.readers != nil {
			for range cap(b.readers) {
				c := <-b.readers
				if c == nil {
					continue
				}
				if cerr := c.close(); err == nil {
					err = cerr
				}
			}
		}
	})
	return err
}
