package protocol

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// ProtocolVersion is the protocol major this package speaks; the migrations
// write it to cairnq_meta as protocol_version.
const ProtocolVersion = 1

// SchemaVersion is the cairnq_meta schema_version the newest embedded
// migration sets. A database reporting a higher one was migrated by a
// newer SDK of the same protocol major: still usable, and worth a warning.
const SchemaVersion = 10

// Dialect names a database dialect; it selects the statement and migration
// subtree.
type Dialect string

// The supported dialects.
const (
	// SQLite is the dialect of SQLite databases.
	SQLite Dialect = "sqlite"
	// Postgres is the dialect of PostgreSQL databases.
	Postgres Dialect = "postgres"
)

//go:embed sql/sqlite/*.sql sql/postgres/*.sql migrations/sqlite/*.sql migrations/postgres/*.sql
var files embed.FS

// Set is the compiled statements of one dialect. It is immutable and safe for
// concurrent use.
type Set struct {
	byName map[string]*Statement
	names  []string
}

// Get returns the named statement, or nil if the dialect has no such statement.
func (s *Set) Get(name string) *Statement { return s.byName[name] }

// Names returns the statement names in sorted order.
func (s *Set) Names() []string { return slices.Clone(s.names) }

var (
	sqliteSet   = sync.OnceValue(func() *Set { return mustLoad(SQLite) })
	postgresSet = sync.OnceValue(func() *Set { return mustLoad(Postgres) })

	sqliteMigrations   = sync.OnceValue(func() []Migration { return mustMigrations(SQLite) })
	postgresMigrations = sync.OnceValue(func() []Migration { return mustMigrations(Postgres) })
)

// Statements returns the embedded statements of dialect d, compiled once on
// first use. It panics for an unknown dialect or if an embedded file does not
// compile; the package's tests compile every file, so the latter is a build
// defect rather than a runtime condition.
func Statements(d Dialect) *Set {
	switch d {
	case SQLite:
		return sqliteSet()
	case Postgres:
		return postgresSet()
	}
	panic(fmt.Sprintf("protocol: unknown dialect %q", d))
}

func mustLoad(d Dialect) *Set {
	set, err := load(d)
	if err != nil {
		panic(err)
	}
	return set
}

func load(d Dialect) (*Set, error) {
	dir := path.Join("sql", string(d))
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	set := &Set{byName: make(map[string]*Statement, len(entries))}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		src, err := fs.ReadFile(files, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		st, err := Compile(name, string(src), d)
		if err != nil {
			return nil, err
		}
		set.byName[name] = st
		set.names = append(set.names, name)
	}
	slices.Sort(set.names)
	return set, nil
}

// Migration is one schema migration script: several statements, no
// parameters, run as one unit and recorded in the ledger under Name.
type Migration struct {
	Name string // file name, e.g. "0001_init.sql"; the ledger key
	SQL  string
}

// Migrations returns dialect d's migrations in the order they must be
// applied (file name order). Ordinals are shared across dialects, so a
// dialect may skip one (SQLite has no 0003). It panics for an unknown dialect.
func Migrations(d Dialect) []Migration {
	switch d {
	case SQLite:
		return slices.Clone(sqliteMigrations())
	case Postgres:
		return slices.Clone(postgresMigrations())
	}
	panic(fmt.Sprintf("protocol: unknown dialect %q", d))
}

func mustMigrations(d Dialect) []Migration {
	dir := path.Join("migrations", string(d))
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries { // ReadDir sorts by file name
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(files, path.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Name: e.Name(), SQL: string(b)})
	}
	return out
}
