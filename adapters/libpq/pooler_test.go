package cairnqlibpq_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lib/pq"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// Behind a transaction-mode pooler lib/pq binds statements by name on
// server connections it does not own: its prepared statements are named
// "1", "2"... per connection, and without binary_parameters a statement
// with arguments is parsed in one round trip and bound in the next, to
// whatever the server connection holds by then. Open and New must both
// work there on their defaults, and in session mode too.
func TestOpenBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		e, err := cairnqlibpq.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatalf("Open through the pooler: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}

func TestNewBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e := cairnqlibpq.New(db, dsn, nil)
		t.Cleanup(func() { e.Close() })
		return e
	})
}

// A pooler that drops the search_path startup parameter (configured to
// ignore it) would put cairnq's tables in the server's default schema:
// Open sees where the connections resolve and refuses, as a schema
// mismatch. A pooler that refuses the parameter fails the connection
// (TestOpenWithASchemaThePoolerRefuses).
func TestOpenWithASchemaThePoolerDrops(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dropped := pgtest.Pooler(t, dsn, pgtest.PoolSession, "search_path")
	_, err := cairnqlibpq.Open(context.Background(), dropped, &cairnqlibpq.Options{Schema: "jobs"})
	if !errors.Is(err, cairnq.ErrSchemaMismatch) {
		t.Fatalf("Open with a schema the pooler drops: %v, want ErrSchemaMismatch", err)
	}
}

// A pooler refusing the search_path startup parameter that Options.Schema
// sets makes Open fail with a *cairnq.OpenError saying what to do, and
// doing it works.
func TestOpenWithASchemaThePoolerRefuses(t *testing.T) {
	t.Parallel()
	adaptertest.OpenWithASchemaThePoolerRefuses(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
		e, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: schema})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { e.Close() })
		return e, nil
	})
}

// queryText is the text of the statement as the server shows it while it
// runs: the arguments bound ($1), or written into it.
func queryText(t *testing.T, e executor.Executor) string {
	t.Helper()
	rows := adaptertest.Query(t, e, "SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid() AND $1::text <> ''", "zz-marker")
	q, _ := rows[0]["query"].(string)
	return q
}

// The arguments stay out of the statement's text (where the server shows
// and logs it) wherever lib/pq sends them in one round trip: a pool Open
// makes (binary_parameters, or prepared on a direct connection), and New
// on a DSN setting binary_parameters=yes. Only New on lib/pq's default
// writes them into the text, which keeps it safe behind a pooler.
func TestArgumentsStayBoundWhereLibpqSendsThemAtOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pooled := pgtest.Pooler(t, dsn, pgtest.PoolSession)
	newOn := func(dsn string) executor.Executor {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return cairnqlibpq.New(db, dsn, nil)
	}
	binary := dsn + "&binary_parameters=yes"
	if !strings.Contains(dsn, "?") {
		binary = dsn + " binary_parameters=yes"
	}
	for _, c := range []struct {
		name   string
		open   func() executor.Executor
		inline bool
	}{
		{"Open, direct", func() executor.Executor { return open(t, dsn, nil) }, false},
		{"Open, through a pooler", func() executor.Executor { return open(t, pooled, nil) }, false},
		{"New with binary_parameters", func() executor.Executor { return newOn(binary) }, false},
		{"New on lib/pq's default", func() executor.Executor { return newOn(dsn) }, true},
	} {
		q := queryText(t, c.open())
		if inlined := strings.Contains(q, "zz-marker"); inlined != c.inline || !inlined && !strings.Contains(q, "$1") {
			t.Errorf("%s: the server shows %q; want the arguments inlined: %v", c.name, q, c.inline)
		}
	}
}

// Over a Unix socket the server sees no client address to compare; the
// socket itself proves the route when it is one the server listens on
// (one of its unix_socket_directories, named for its port), and Open
// keeps its statements prepared there.
func TestOpenPreparesOverTheServersOwnUnixSocket(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "cairnq-socket-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // the cluster's user makes its socket here
		t.Fatal(err)
	}
	c := pgtest.NewCluster(t, "unix_socket_directories = '"+dir+"'")
	cfg, err := pq.NewConfig(c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", dir, cfg.Port, cfg.User, cfg.Database)
	e := open(t, dsn, nil)
	e.DB().SetMaxOpenConns(1)
	ctx := adaptertest.Ctx(t)
	for i := range 2 {
		adaptertest.QueryOne(t, ctx, e, "SELECT $1::int8 AS x", int64(i))
	}
	var n int64
	if err := e.DB().QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("no statement prepared over the server's own socket %s", dir)
	}
}

// A pooler refusing a connection for good (a database it does not know, a
// startup parameter it does not pass on, a login the server refused)
// answers 08P01, as it does mid-session when it lost its server: at
// connect it is no outage, from Open's first connection and from a later
// connection of the pool Open makes. (Over an application's *sql.DB given
// to New, nothing tells a connect from a statement: there it still reads
// as an outage, as the package outage documents.)
func TestConnectRefusedByAPoolerIsNoOutage(t *testing.T) {
	t.Parallel()
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		adaptertest.ConnectRefusedByAPooler(t, func(t *testing.T, dsn, schema string) (executor.Executor, error) {
			e, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: schema})
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
	t.Run("Open's pool", func(t *testing.T) {
		t.Parallel()
		adaptertest.ConnectRefusedByAPooler(t, func(t *testing.T, dsn, _ string) (executor.Executor, error) {
			e, err := cairnqlibpq.OpenPool(dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e, nil
		})
	})
}
