package engine

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/ncruces/go-sqlite3"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/dirsnap"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/protocol"
)

// inspectDB is one real database the OpenExisting and inspection tests run
// on, with what they need to set it up and look at it from outside the
// store.
type inspectDB struct {
	dialect protocol.Dialect
	// open opens a store on the database, creating and migrating it
	// unless existing.
	open func(t *testing.T, existing bool) (*Store, error)
	// exec runs a script through a connection of its own.
	exec func(t *testing.T, script string)
	// inspect is InspectSQLite or InspectPostgres on the database.
	inspect func(t *testing.T) (*cairnqtype.SchemaStatus, error)
	// tables counts the cairnq tables (cairnq_%) the database holds.
	tables func(t *testing.T) int
	// now is the database clock, in epoch ms, as the statements read it.
	now func(t *testing.T) int64
}

func sqliteInspectDB(t *testing.T) inspectDB {
	path := filepath.Join(t.TempDir(), "tasks.db")
	return inspectDB{
		dialect: protocol.SQLite,
		open: func(t *testing.T, existing bool) (*Store, error) {
			return OpenSQLite(t.Context(), path, SQLiteOptions{OpenExisting: existing})
		},
		exec: func(t *testing.T, script string) {
			t.Helper()
			c, err := sqlite3.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Exec(script); err != nil {
				t.Fatal(err)
			}
		},
		inspect: func(t *testing.T) (*cairnqtype.SchemaStatus, error) { return InspectSQLite(t.Context(), path) },
		tables: func(t *testing.T) int {
			t.Helper()
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				return 0
			}
			c, err := sqlite3.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, _, err := c.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'cairnq%'")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			st.Step()
			return st.ColumnInt(0)
		},
		now: func(*testing.T) int64 { return time.Now().UnixMilli() },
	}
}

func postgresInspectDB(t *testing.T) inspectDB {
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ex := sqlexec.New(db, nil)
	one := func(t *testing.T, query string) int64 {
		t.Helper()
		var n int64
		if err := db.QueryRowContext(t.Context(), query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return inspectDB{
		dialect: protocol.Postgres,
		open: func(t *testing.T, existing bool) (*Store, error) {
			return OpenPostgres(t.Context(), ex, PostgresOptions{OpenExisting: existing})
		},
		exec: func(t *testing.T, script string) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), script); err != nil {
				t.Fatal(err)
			}
		},
		inspect: func(t *testing.T) (*cairnqtype.SchemaStatus, error) { return InspectPostgres(t.Context(), ex, "") },
		tables: func(t *testing.T) int {
			return int(one(t, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'cairnq%'"))
		},
		now: func(t *testing.T) int64 {
			return one(t, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)")
		},
	}
}

func bothInspectDBs(t *testing.T, fn func(t *testing.T, db inspectDB)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteInspectDB(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresInspectDB(t)) })
}

// bothStores runs fn on a migrated store of each dialect, closed after it.
func bothStores(t *testing.T, fn func(t *testing.T, s *Store)) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		s, err := db.open(t, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
}

// A store opened with OpenExisting on a database without cairnq creates
// nothing and says so; inspecting it reports it absent.
func TestOpenExistingRefusesAnEmptyDatabase(t *testing.T) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		if _, err := db.open(t, true); !errors.Is(err, cairnqtype.ErrNoDatabase) {
			t.Fatalf("OpenExisting on an empty database: %v, want ErrNoDatabase", err)
		}
		st, err := db.inspect(t)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != cairnqtype.SchemaAbsent || !slices.Equal(st.Missing, migrationNames(db.dialect)) || len(st.Migrations) != 0 {
			t.Errorf("inspect of an empty database = %+v", st)
		}
		if n := db.tables(t); n != 0 {
			t.Errorf("an empty database holds %d cairnq tables after OpenExisting and inspect, want 0", n)
		}
	})
}

// Behind, ahead and another protocol major: OpenExisting refuses what it
// must not run on (changing nothing) and opens the rest; inspect reports
// each state.
func TestOpenExistingVersionStates(t *testing.T) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		s, err := db.open(t, false)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		st, err := db.inspect(t)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != cairnqtype.SchemaCurrent || st.ProtocolVersion != protocol.ProtocolVersion || st.SchemaVersion != protocol.SchemaVersion ||
			len(st.Missing) != 0 || len(st.Unknown) != 0 || len(st.Migrations) != len(protocol.Migrations(db.dialect)) {
			t.Fatalf("inspect after migrating = %+v", st)
		}
		for _, m := range st.Migrations {
			if time.Since(m.AppliedAt) > time.Hour || time.Since(m.AppliedAt) < -time.Hour {
				t.Errorf("ledger row %s applied at %v", m.Name, m.AppliedAt)
			}
		}
		s, err = db.open(t, true)
		if err != nil {
			t.Fatalf("OpenExisting on a current database: %v", err)
		}
		s.Close()

		// Behind: the ledger lacks the newest migration.
		db.exec(t, "DELETE FROM cairnq_migrations WHERE name = '0010_drop_status_index.sql'")
		if _, err := db.open(t, true); !errors.Is(err, cairnqtype.ErrSchemaMismatch) {
			t.Errorf("OpenExisting on a database behind: %v, want ErrSchemaMismatch", err)
		}
		if st, err := db.inspect(t); err != nil || st.State != cairnqtype.SchemaBehind || !slices.Equal(st.Missing, []string{"0010_drop_status_index.sql"}) {
			t.Errorf("inspect behind = %+v, %v", st, err)
		}
		db.exec(t, "INSERT INTO cairnq_migrations (name, applied_at_ms) VALUES ('0010_drop_status_index.sql', 1)")

		// Ahead: a newer SDK's migration and schema version.
		db.exec(t, "INSERT INTO cairnq_migrations (name, applied_at_ms) VALUES ('0099_future.sql', 2); UPDATE cairnq_meta SET value = '99' WHERE key = 'schema_version'")
		if st, err := db.inspect(t); err != nil || st.State != cairnqtype.SchemaAhead || !slices.Equal(st.Unknown, []string{"0099_future.sql"}) || st.SchemaVersion != 99 {
			t.Errorf("inspect ahead = %+v, %v", st, err)
		}
		s, err = db.open(t, true)
		if err != nil {
			t.Fatalf("OpenExisting on a database ahead: %v", err)
		}
		s.Close()

		// Another protocol major.
		db.exec(t, "UPDATE cairnq_meta SET value = '2' WHERE key = 'protocol_version'")
		var pv *cairnqtype.ProtocolVersionMismatchError
		if _, err := db.open(t, true); !errors.As(err, &pv) || pv.Found != 2 {
			t.Errorf("OpenExisting on protocol 2: %v, want *ProtocolVersionMismatchError", err)
		}
		if st, err := db.inspect(t); err != nil || st.State != cairnqtype.SchemaIncompatible || st.ProtocolVersion != 2 {
			t.Errorf("inspect incompatible = %+v, %v", st, err)
		}
	})
}

// QueueAges gives each queue one row on Postgres, whose statement reads
// the database's clock (SQLite's now is a parameter). With the clock read
// per row, a plan that rescanned the clock's side of the join put the rows
// before and after a millisecond's turn in separate groups: with 301 due
// tasks, in every run of this test, within its 50 reads.
func TestQueueAgesReadsTheClockOnce(t *testing.T) {
	db := postgresInspectDB(t)
	ctx := t.Context()
	s, err := db.open(t, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	task, err := s.Submit(ctx, SubmitParams{Name: "render", SubmitOptions: cairnqtype.SubmitOptions{Queue: "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	// 300 copies of it, all due.
	db.exec(t, `INSERT INTO cairnq_tasks
SELECT (jsonb_populate_record(NULL::cairnq_tasks, to_jsonb(t) || jsonb_build_object('id', t.id || '-' || g))).*
FROM cairnq_tasks AS t CROSS JOIN generate_series(1, 300) AS g
WHERE t.id = '`+task.ID+`'`)
	for range 50 {
		ages, err := s.QueueAges(ctx)
		if err != nil || len(ages) != 1 || ages[0].Queue != "gpu" || ages[0].Due != 301 {
			t.Fatalf("QueueAges = %+v, %v; want one row for gpu with 301 due", ages, err)
		}
	}
}

// The health reads: expired leases, the age of due work per queue, and
// recent failures by name.
func TestHealthReads(t *testing.T) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		ctx := t.Context()
		s, err := db.open(t, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		submit := func(name, queue string, delay time.Duration) *cairnqtype.Task {
			t.Helper()
			task, err := s.Submit(ctx, SubmitParams{Name: name, SubmitOptions: cairnqtype.SubmitOptions{Queue: queue, Delay: delay, MaxAttempts: 1}})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		if got, err := s.ExpiredLeases(ctx, 0); err != nil || len(got) != 0 {
			t.Errorf("ExpiredLeases on an empty database = %v, %v", got, err)
		}
		if got, err := s.QueueAges(ctx); err != nil || len(got) != 0 {
			t.Errorf("QueueAges on an empty database = %v, %v", got, err)
		}
		if got, err := s.RecentFailures(ctx, time.Hour); err != nil || len(got) != 0 {
			t.Errorf("RecentFailures on an empty database = %v, %v", got, err)
		}

		stuck := submit("stuck", "default", 0)
		claimed, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w1", Lease: time.Minute})
		if err != nil || len(claimed) != 1 || claimed[0].ID != stuck.ID {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		now := db.now(t)
		// The queued task became due two hours ago.
		old := submit("render", "gpu", 0)
		submit("render", "gpu", 0)
		submit("later", "gpu", time.Hour) // not due: not counted
		db.exec(t, "UPDATE cairnq_tasks SET run_at_ms = "+itoa(now-2*3600_000)+" WHERE id = '"+old.ID+"'")
		for _, name := range []string{"send", "send", "resize"} {
			task := submit(name, "mail", 0)
			got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"mail"}, WorkerID: "w2", Lease: time.Minute})
			if err != nil || len(got) != 1 || got[0].ID != task.ID {
				t.Fatalf("claim = %v, %v", got, err)
			}
			if _, err := s.Fail(ctx, task.ID, "w2", cairnqtype.ErrorEnvelope{Type: "E", Code: "boom", Message: "boom"}, false, 0); err != nil {
				t.Fatal(err)
			}
		}
		// One failure long ago, out of the window.
		ancient := submit("send", "mail", 0)
		db.exec(t, "UPDATE cairnq_tasks SET status = 'failed', completed_at_ms = 1000 WHERE id = '"+ancient.ID+"'")
		// The lease ran out a minute ago, after the last claim (which would
		// have recovered it).
		db.exec(t, "UPDATE cairnq_tasks SET lease_until_ms = "+itoa(now-60_000)+" WHERE id = '"+stuck.ID+"'")

		expired, err := s.ExpiredLeases(ctx, 0)
		if err != nil || len(expired) != 1 || expired[0].ID != stuck.ID || expired[0].WorkerID != "w1" {
			t.Errorf("ExpiredLeases = %v, %v", expired, err)
		}
		ages, err := s.QueueAges(ctx)
		if err != nil || len(ages) != 1 || ages[0].Queue != "gpu" || ages[0].Due != 2 ||
			ages[0].OldestAge < 2*time.Hour || ages[0].OldestAge > 3*time.Hour || ages[0].OldestRunAt.UnixMilli() != now-2*3600_000 {
			t.Errorf("QueueAges = %+v, %v", ages, err)
		}
		fails, err := s.RecentFailures(ctx, time.Hour)
		want := []string{"send:2", "resize:1"}
		var got []string
		for _, f := range fails {
			got = append(got, f.Name+":"+itoa(int64(f.Count)))
			if time.Since(f.LastFailedAt) > time.Minute {
				t.Errorf("%s last failed at %v", f.Name, f.LastFailedAt)
			}
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("RecentFailures = %v, %v; want %v", got, err, want)
		}
		if _, err := s.RecentFailures(ctx, 0); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
			t.Errorf("RecentFailures(0) = %v, want ErrInvalidArgument", err)
		}
		if _, err := s.ExpiredLeases(ctx, -1); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
			t.Errorf("ExpiredLeases(-1) = %v, want ErrInvalidArgument", err)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// SQLite: OpenExisting on a missing file creates neither it nor its
// directory, and on a cairnq database leaves the file byte-identical and
// no -wal or -shm behind, whatever it reads.
func TestOpenExistingSQLiteChangesNothing(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	missing := filepath.Join(dir, "sub", "missing.db")
	if _, err := OpenSQLite(ctx, missing, SQLiteOptions{OpenExisting: true}); !errors.Is(err, cairnqtype.ErrNoDatabase) {
		t.Fatalf("OpenExisting on a missing file: %v, want ErrNoDatabase", err)
	}
	if st, err := InspectSQLite(ctx, missing); err != nil || st.State != cairnqtype.SchemaAbsent {
		t.Fatalf("InspectSQLite on a missing file = %+v, %v", st, err)
	}
	if _, err := OpenSQLite(ctx, "file:"+missing, SQLiteOptions{OpenExisting: true}); !errors.Is(err, cairnqtype.ErrNoDatabase) {
		t.Fatalf("OpenExisting on a missing file's URI: %v, want ErrNoDatabase", err)
	}
	if st, err := InspectSQLite(ctx, "file:"+missing+"?cache=private"); err != nil || st.State != cairnqtype.SchemaAbsent {
		t.Fatalf("InspectSQLite on a missing file's URI = %+v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing file's directory was created: %v", err)
	}

	// Another application's database: no cairnq tables, refused alike.
	foreign := filepath.Join(dir, "app.db")
	c, err := sqlite3.Open(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec("CREATE TABLE users (id integer primary key)"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	before := dirsnap.Take(t, dir)
	if _, err := OpenSQLite(ctx, foreign, SQLiteOptions{OpenExisting: true}); !errors.Is(err, cairnqtype.ErrNoDatabase) {
		t.Fatalf("OpenExisting on another application's file: %v, want ErrNoDatabase", err)
	}
	if st, err := InspectSQLite(ctx, foreign); err != nil || st.State != cairnqtype.SchemaAbsent {
		t.Fatalf("InspectSQLite on another application's file = %+v, %v", st, err)
	}
	dirsnap.Same(t, dir, before)

	// Not a database at all.
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSQLite(ctx, junk, SQLiteOptions{OpenExisting: true}); !errors.Is(err, cairnqtype.ErrNotADatabase) {
		t.Errorf("OpenExisting on junk: %v, want ErrNotADatabase", err)
	}
	if _, err := InspectSQLite(ctx, junk); !errors.Is(err, cairnqtype.ErrNotADatabase) {
		t.Errorf("InspectSQLite on junk: %v, want ErrNotADatabase", err)
	}

	path := filepath.Join(dir, "tasks.db")
	s, err := OpenSQLite(ctx, path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	task, err := s.Submit(ctx, SubmitParams{Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	before = dirsnap.Take(t, dir)
	s, err = OpenSQLite(ctx, path, SQLiteOptions{OpenExisting: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, task.ID); err != nil || got.ID != task.ID {
		t.Errorf("Get = %v, %v", got, err)
	}
	if _, err := s.Stats(ctx, ""); err != nil {
		t.Error(err)
	}
	if _, err := s.List(ctx, cairnqtype.ListOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := s.ExpiredLeases(ctx, 0); err != nil {
		t.Error(err)
	}
	if _, err := s.QueueAges(ctx); err != nil {
		t.Error(err)
	}
	if _, err := s.RecentFailures(ctx, time.Hour); err != nil {
		t.Error(err)
	}
	if st, err := InspectSQLite(ctx, path); err != nil || st.State != cairnqtype.SchemaCurrent {
		t.Errorf("InspectSQLite = %+v, %v", st, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dirsnap.Same(t, dir, before)
}

// Postgres: a named schema that does not exist is ErrNoDatabase and is not
// created; inspect reports it absent.
func TestOpenExistingPostgresMissingSchema(t *testing.T) {
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = "jobs"
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	ex := sqlexec.New(db, nil)
	if _, err := OpenPostgres(t.Context(), ex, PostgresOptions{Schema: "jobs", OpenExisting: true}); !errors.Is(err, cairnqtype.ErrNoDatabase) {
		t.Fatalf("OpenExisting on a missing schema: %v, want ErrNoDatabase", err)
	}
	st, err := InspectPostgres(t.Context(), ex, "jobs")
	if err != nil || st.State != cairnqtype.SchemaAbsent || st.Schema != "jobs" {
		t.Fatalf("InspectPostgres on a missing schema = %+v, %v", st, err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = 'jobs'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("schema jobs: %d, %v; want it still absent", n, err)
	}
	if _, err := InspectPostgres(t.Context(), ex, "bad name"); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
		t.Errorf("InspectPostgres with a bad schema name: %v", err)
	}
	if _, err := InspectPostgres(t.Context(), nil, ""); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
		t.Errorf("InspectPostgres with no executor: %v", err)
	}
}
