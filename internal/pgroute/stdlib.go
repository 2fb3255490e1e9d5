package pgroute

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// KeepsStatements reports whether statements run in pgx mode m leave
// something on the server that a later round trip relies on: a named
// prepared statement (cache_statement, pgx's default), or the unnamed
// statement parsed in one round trip and executed in the next
// (describe_exec).
func KeepsStatements(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeCacheStatement || m == pgx.QueryExecModeDescribeExec
}

// Unnamed is the mode cairnq's statements run in where the configured one
// keeps statements and the route is not proven direct: one round trip, an
// unnamed statement, the statement's description cached on the client.
const Unnamed = pgx.QueryExecModeCacheDescribe

// Stdlib decides how cairnq's statements go to an application's *sql.DB
// whose driver may be pgx's stdlib, as under gorm's postgres driver and
// bun's pgdialect. pgx's stdlib takes a pgx.QueryExecMode as a statement's
// first argument, so where the pool's configured mode keeps statements on
// the server and the route is not proven direct, cairnq's statements run
// in Unnamed without the application's pool being reconfigured. On any
// other driver (bun's pgdriver, which writes arguments into the text and
// sends one message) statements go as they are.
//
// What it needs is learned from one of the pool's connections by the first
// statement; statements wait for that once.
type Stdlib struct {
	db *sql.DB
	// decided is the answer once learned (1: unnamed, 2: as they are), so
	// that every statement after the first reads it without a lock.
	decided atomic.Int32

	mu      sync.Mutex
	learned bool      // stdlib, named and route are known
	retry   time.Time // when learning failed, the earliest next attempt
	stdlib  bool      // the driver is pgx's stdlib
	named   bool      // its configured mode keeps statements
	direct  bool      // its route is proven direct
}

// NewStdlib returns the decision for db.
func NewStdlib(db *sql.DB) *Stdlib { return &Stdlib{db: db} }

// Args returns args as they go to the pool: with Unnamed put first when
// the statement must not leave anything on the server, else unchanged. A
// nil Stdlib leaves them unchanged.
func (s *Stdlib) Args(ctx context.Context, args []any) []any {
	if s == nil {
		return args
	}
	var unnamed bool
	if d := s.decided.Load(); d != 0 {
		unnamed = d == 1
	} else {
		s.mu.Lock()
		if !s.learned && !time.Now().Before(s.retry) {
			s.learn(ctx)
		}
		unnamed = s.stdlib && s.named && !s.direct
		if s.learned {
			if unnamed {
				s.decided.Store(1)
			} else {
				s.decided.Store(2)
			}
		}
		s.mu.Unlock()
	}
	if !unnamed {
		return args
	}
	return append([]any{Unnamed}, args...)
}

// pgxConner is what pgx's stdlib driver connection (*stdlib.Conn) offers.
type pgxConner interface{ Conn() *pgx.Conn }

// errNotPgx stops Raw on a driver connection that is not pgx's stdlib.
var errNotPgx = errors.New("not pgx's stdlib")

// learn finds the driver, its mode and the route on one connection of the
// pool. Called with mu held. On failure what was found stays (a pgx pool
// whose route could not be read counts as not direct) and learning is
// tried again after retryAfter.
func (s *Stdlib) learn(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		s.retry = time.Now().Add(retryAfter)
		return
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConner)
		if !ok {
			return errNotPgx
		}
		s.stdlib = true
		s.named = KeepsStatements(pc.Conn().Config().DefaultQueryExecMode)
		if !s.named {
			return nil
		}
		r, err := OfConn(ctx, pc.Conn())
		s.direct = r.KeepsSession()
		return err
	})
	switch {
	case errors.Is(err, errNotPgx):
		s.learned = true
	case err != nil:
		s.retry = time.Now().Add(retryAfter)
	default:
		s.learned = true
	}
}
