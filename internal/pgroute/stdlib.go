package pgroute

import (
	"context"
	"database/sql"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// pgx's query execution modes, by their values in pgx v5 (the type is
// pgx.QueryExecMode, an int32): the two that keep something on the server
// between round trips, and the one cairnq's statements run in instead.
const (
	pgxCacheStatement = 1 // a named statement per text, pgx's default
	pgxCacheDescribe  = 2 // unnamed, one round trip, the description cached on the client
	pgxDescribeExec   = 3 // the unnamed statement parsed in one round trip and run in the next
)

// KeepsStatements reports whether statements run in the pgx mode of value
// m leave something on the server that a later round trip relies on.
func KeepsStatements[M ~int32](m M) bool { return m == pgxCacheStatement || m == pgxDescribeExec }

// Stdlib decides how cairnq's statements go to an application's *sql.DB
// whose driver may be pgx's stdlib (sql.Open("pgx"), gorm's postgres
// driver, bun's pgdialect over it). pgx's stdlib takes a pgx.QueryExecMode
// as a statement's first argument, so where the pool's configured mode
// keeps statements on the server (pgx's default) and the route is not
// proven to keep one server session per connection, cairnq's statements
// run unnamed (cache_describe) without the application's pool being
// reconfigured. On any other driver statements go as they are.
//
// This package imports no driver, so that executor/sqlexec, which uses it,
// imports none either: it reaches pgx's connection through the methods of
// pgx's public API by reflection (the driver connection's Conn, the
// connection's Config and PgConn, the PgConn's PID and Conn), and makes
// the mode argument as a value of the configured mode's own type. Where
// any of that is not there, the pool is not pgx's stdlib, or not a version
// this was written for, and statements go as they are.
//
// What it needs is learned on one of the pool's connections by the first
// statement; statements wait for that once.
type Stdlib struct {
	db Pool
	// mode is the argument put first on every statement, once learned: a
	// pgx.QueryExecMode, or nil for none.
	mode atomic.Pointer[any]
	mu   sync.Mutex
	// fallback is the mode found before learning failed (pgx's stdlib, its
	// route unread: the unnamed one), used until retry.
	fallback *any
	retry    time.Time
}

// Pool is what Stdlib needs of a database/sql pool: one connection of it
// to learn on. *sql.DB and *sqlx.DB have it.
type Pool interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

// NewStdlib returns the decision for db; nil for a nil db.
func NewStdlib(db Pool) *Stdlib {
	if db == nil || reflect.ValueOf(db).Kind() == reflect.Pointer && reflect.ValueOf(db).IsNil() {
		return nil
	}
	return &Stdlib{db: db}
}

// Args returns args as they go to the pool: with the unnamed mode put
// first when the statement must not leave anything on the server, else
// unchanged. A nil Stdlib leaves them unchanged.
func (s *Stdlib) Args(ctx context.Context, args []any) []any {
	if s == nil {
		return args
	}
	m := s.mode.Load()
	if m == nil {
		m = s.learn(ctx)
	}
	if *m == nil {
		return args
	}
	return append([]any{*m}, args...)
}

// pgxFacts is what learn finds out of a pgx stdlib connection.
type pgxFacts struct {
	named         bool // the configured mode keeps statements
	unnamed       any  // cache_describe, of pgx's own type
	pid           int64
	local, remote net.Addr
}

// learn finds the mode statements need on one connection of the pool, and
// keeps it. Where learning fails once pgx's stdlib is found, it answers
// with the unnamed mode until it tries again, after retryAfter; where no
// connection was had, nothing is known, and the next statement tries.
func (s *Stdlib) learn(ctx context.Context) *any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mode.Load(); m != nil {
		return m
	}
	var none any
	if s.fallback != nil && time.Now().Before(s.retry) {
		return s.fallback
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		// No connection to learn on: the statement, which needs one too,
		// most likely fails the same way. The next one learns again.
		return &none
	}
	defer conn.Close()
	var f *pgxFacts
	_ = conn.Raw(func(dc any) error { f = pgxFactsOf(dc); return nil })
	if f == nil || !f.named {
		s.mode.Store(&none) // not pgx's stdlib, or nothing kept on the server
		return &none
	}
	unnamed := f.unnamed
	// The route, asked with the unnamed mode so that asking leaves nothing.
	row := make([]any, Columns)
	dest := make([]any, len(row))
	for i := range row {
		dest[i] = &row[i]
	}
	if err := conn.QueryRowContext(ctx, Query, f.unnamed).Scan(dest...); err != nil {
		s.fallback = &unnamed
		s.retry = time.Now().Add(retryAfter)
		return &unnamed
	}
	if Of(f.local, f.remote, f.pid, row).KeepsSession() {
		unnamed = nil
	}
	s.mode.Store(&unnamed)
	return &unnamed
}

// pgxFactsOf reads pgx's facts off a driver connection, or returns nil
// when it is not pgx's stdlib as this package knows it.
func pgxFactsOf(dc any) *pgxFacts {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.Elem().Type().PkgPath() != "github.com/jackc/pgx/v5/stdlib" {
		return nil
	}
	conn, ok := call(v, "Conn") // *pgx.Conn
	if !ok {
		return nil
	}
	cfg, ok := call(conn, "Config") // *pgx.ConnConfig
	if !ok || cfg.Kind() != reflect.Pointer || cfg.IsNil() {
		return nil
	}
	mode := cfg.Elem().FieldByName("DefaultQueryExecMode")
	if !mode.IsValid() || mode.Kind() != reflect.Int32 || mode.Type().Name() != "QueryExecMode" {
		return nil
	}
	f := &pgxFacts{named: KeepsStatements(int32(mode.Int()))}
	unnamed := reflect.New(mode.Type()).Elem()
	unnamed.SetInt(pgxCacheDescribe)
	f.unnamed = unnamed.Interface()
	pg, ok := call(conn, "PgConn") // *pgconn.PgConn
	if !ok {
		return nil
	}
	if pid, ok := call(pg, "PID"); ok && pid.CanUint() {
		f.pid = int64(pid.Uint())
	}
	if sock, ok := call(pg, "Conn"); ok {
		if nc, ok := sock.Interface().(net.Conn); ok {
			f.local, f.remote = nc.LocalAddr(), nc.RemoteAddr()
		}
	}
	return f
}

// call calls v's method name, which takes nothing and returns one value.
func call(v reflect.Value, name string) (reflect.Value, bool) {
	m := v.MethodByName(name)
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return reflect.Value{}, false
	}
	out := m.Call(nil)[0]
	if out.Kind() == reflect.Pointer && out.IsNil() {
		return reflect.Value{}, false
	}
	return out, true
}
