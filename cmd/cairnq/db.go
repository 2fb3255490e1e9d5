package main

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// defaultDB is the database of a command given neither --db, $CAIRNQ_DB
// nor a Postgres $DATABASE_URL.
const defaultDB = "tasks.db"

// dbFlags are the flags every command but demo and version takes: --db
// and --schema, and --json on every one of them but ui.
type dbFlags struct {
	db, schema string
	json       bool
}

// addDBFlags defines --db and --schema on fs, and --json when withJSON (a
// command given it describes its JSON above the flags, in its help).
func addDBFlags(fs *flag.FlagSet, withJSON bool) *dbFlags {
	f := &dbFlags{}
	fs.StringVar(&f.db, "db", "", "a SQLite `file`, or a Postgres URL or DSN (default $CAIRNQ_DB, else $DATABASE_URL when it is a Postgres URL, else ./"+defaultDB+")")
	fs.StringVar(&f.schema, "schema", "", "the Postgres `schema` cairnq lives in (default: where the connection's search_path resolves)")
	if withJSON {
		fs.BoolVar(&f.json, "json", false, "print one JSON document (shape above) instead of text")
	}
	return f
}

// target is the database a command runs on, and where that came from.
type target struct {
	postgres bool
	dsn      string // the SQLite path or the Postgres URL/DSN
	schema   string
	from     string
}

// String names the database for messages, never with a password.
func (t target) String() string {
	if !t.postgres {
		return t.dsn
	}
	s := "postgres"
	if cfg, err := pgconn.ParseConfig(t.dsn); err == nil {
		s = fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	if t.schema != "" {
		s += " schema " + t.schema
	}
	return s
}

var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// target resolves the database: --db, else $CAIRNQ_DB, else $DATABASE_URL
// when it is a Postgres URL, else ./tasks.db.
func (f *dbFlags) target(e *env) (target, error) {
	t := target{schema: f.schema}
	switch {
	case f.db != "":
		t.dsn, t.from = f.db, "from --db"
	case e.getenv("CAIRNQ_DB") != "":
		t.dsn, t.from = e.getenv("CAIRNQ_DB"), "from $CAIRNQ_DB"
	case isPostgresURL(e.getenv("DATABASE_URL")):
		t.dsn, t.from = e.getenv("DATABASE_URL"), "from $DATABASE_URL"
	default:
		t.dsn, t.from = defaultDB, "the default without --db, $CAIRNQ_DB or a Postgres $DATABASE_URL"
	}
	t.postgres = isPostgres(t.dsn)
	if t.schema != "" {
		if !t.postgres {
			return t, e.usageError("--schema is for Postgres; %s is a SQLite file", t.dsn)
		}
		if !schemaName.MatchString(t.schema) {
			return t, e.usageError("--schema %q is not a plain identifier (letters, digits, underscores)", t.schema)
		}
	}
	return t, nil
}

// isPostgresURL reports whether s is a postgres:// or postgresql:// URL.
func isPostgresURL(s string) bool {
	l := strings.ToLower(strings.TrimSpace(s))
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// libpqKey matches the start of a key=value DSN: a connection keyword
// libpq knows, then '='. A file name that merely holds '=' is not one.
var libpqKey = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|sslrootcert|sslcert|sslkey|` +
	`connect_timeout|application_name|options|target_session_attrs|channel_binding|client_encoding)\s*=`)

// isPostgres reports whether s names a Postgres database rather than a
// SQLite file.
func isPostgres(s string) bool { return isPostgresURL(s) || libpqKey.MatchString(s) }

// dbError ties an error to the database it came from, for the hint
// reportError adds.
type dbError struct {
	t   target
	err error
}

func (e *dbError) Error() string { return e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

// database is a connection to the target: nothing yet on SQLite (each
// operation opens the file itself), a pool and the pgx adapter over it on
// Postgres. The pool sets search_path to --schema, so nothing is created
// by connecting, unlike cairnqpgx.Open, which creates the schema.
type database struct {
	t      target
	pool   *pgxpool.Pool
	ex     *cairnqpgx.Executor
	client *cairnq.Client
}

func connect(ctx context.Context, t target) (*database, error) {
	d := &database{t: t}
	if !t.postgres {
		return d, nil
	}
	cfg, err := pgxpool.ParseConfig(t.dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: the Postgres DSN (%s): %v", errUsage, t.from, err)
	}
	if t.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{t.schema}.Sanitize()
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = cairnqpgx.DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &dbError{t, err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &dbError{t, fmt.Errorf("connecting to %s: %w", t, err)}
	}
	d.pool, d.ex = pool, cairnqpgx.New(pool, nil)
	return d, nil
}

// inspect reports the installation without changing anything.
func (d *database) inspect(ctx context.Context) (*cairnq.SchemaStatus, error) {
	var st *cairnq.SchemaStatus
	var err error
	if d.t.postgres {
		st, err = cairnq.InspectPostgres(ctx, d.ex, d.t.schema)
	} else {
		st, err = cairnq.InspectSQLite(ctx, d.t.dsn)
	}
	if err != nil {
		return nil, &dbError{d.t, err}
	}
	return st, nil
}

// open opens a client that creates and migrates nothing (OpenExisting).
func (d *database) open(ctx context.Context) (*cairnq.Client, error) {
	var c *cairnq.Client
	var err error
	existing := cairnq.Options{OpenExisting: true}
	if d.t.postgres {
		c, err = cairnq.OpenPostgres(ctx, d.ex, &cairnq.PostgresOptions{Options: existing, Schema: d.t.schema})
	} else {
		c, err = cairnq.Open(ctx, d.t.dsn, &cairnq.SQLiteOptions{Options: existing})
	}
	if err != nil {
		return nil, &dbError{d.t, err}
	}
	d.client = c
	return c, nil
}

func (d *database) close() {
	if d.client != nil {
		d.client.Close()
	}
	if d.ex != nil {
		d.ex.Close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
}

// connect resolves the running command's database from its flags
// (e.db, see env.dbFlags) and connects to it, opening nothing yet. The
// database is closed when the command returns (see runCommand).
func (e *env) connect(ctx context.Context) (*database, error) {
	t, err := e.db.target(e)
	if err != nil {
		return nil, err
	}
	d, err := connect(ctx, t)
	if err != nil {
		return nil, err
	}
	e.database = d
	return d, nil
}

// client connects to the running command's database (see connect) and
// opens a client on it that creates and migrates nothing (OpenExisting).
func (e *env) client(ctx context.Context) (*cairnq.Client, error) {
	d, err := e.connect(ctx)
	if err != nil {
		return nil, err
	}
	return d.open(ctx)
}

// migrateTarget opens t the way an application does, creating the SQLite
// file or the Postgres schema when missing and applying the migrations,
// and closes it again.
func migrateTarget(ctx context.Context, t target) error {
	if !t.postgres {
		c, err := cairnq.Open(ctx, t.dsn, nil)
		if err != nil {
			return &dbError{t, err}
		}
		return c.Close()
	}
	ex, err := cairnqpgx.Open(ctx, t.dsn, &cairnqpgx.Options{Schema: t.schema})
	if err != nil {
		return &dbError{t, err}
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true, Schema: t.schema})
	if err != nil {
		ex.Close()
		return &dbError{t, err}
	}
	return c.Close()
}
