package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
)

// The certification must fail a broken executor, on the check that names
// what is broken. These tests certify a good executor (cairnqpgx over a
// pgxpool) wrapped into deliberately broken ones, through a reporter that
// records failures instead of failing the test, and assert on the record.

func TestBrokenExecutorsFail(t *testing.T) {
	cases := []struct {
		name   string
		broken func(executor.Executor) executor.Executor
		want   string // the check that must fail
	}{
		{"commits_on_error", func(ex executor.Executor) executor.Executor { return commitsOnError{passThrough{ex}} }, "tx_rolls_back_on_error"},
		{"drops_nulls", func(ex executor.Executor) executor.Executor { return dropsNulls{passThrough{ex}} }, "null_params"},
		{"leaks_tx_across_sessions", func(ex executor.Executor) executor.Executor { return leaksTx{passThrough{ex}} }, "tx_is_one_connection"},
		{"decodes_jsonb", func(ex executor.Executor) executor.Executor { return decodesJSONB{passThrough{ex}} }, "jsonb_normalized"},
		{"flattens_errors", func(ex executor.Executor) executor.Executor { return flattensErrors{passThrough{ex}} }, "sqlstate_errors"},
		{"closes_app_pool", func(ex executor.Executor) executor.Executor { return closesAppPool{passThrough{ex}} }, "store_close_keeps_app_pool"},
		{"rows_by_position_misplaced", func(ex executor.Executor) executor.Executor { return misplacesRows{passThrough{ex}} }, "rows_by_position"},
		{"copy_drops_a_row", func(ex executor.Executor) executor.Executor { return dropsCopiedRow{passThrough{ex}} }, "copy_rows"},
		{"copies_outside_the_transaction", func(ex executor.Executor) executor.Executor { return copiesApart{passThrough{ex}} }, "copy_rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			failures := certifyRecorded(t, brokenFactory(c.broken))
			for _, check := range slices.Sorted(maps.Keys(failures)) {
				t.Logf("%s failed:\n\t%s", check, strings.Join(failures[check], "\n\t"))
			}
			if len(failures[c.want]) == 0 {
				t.Errorf("the certification did not fail check %s on an executor that %s (failed: %v)", c.want, strings.ReplaceAll(c.name, "_", " "), slices.Sorted(maps.Keys(failures)))
			}
		})
	}
}

// The same wrapping, broken in nothing, passes: the failures above come
// from the breakage, not from the wrapper or the recorder.
func TestBrokenControlPasses(t *testing.T) {
	t.Parallel()
	failures := certifyRecorded(t, brokenFactory(func(ex executor.Executor) executor.Executor { return passThrough{ex} }))
	for check, msgs := range failures {
		t.Errorf("%s failed on an executor that is not broken:\n\t%s", check, strings.Join(msgs, "\n\t"))
	}
}

// brokenFactory opens cairnqpgx over an application pool and breaks it.
func brokenFactory(broken func(executor.Executor) executor.Executor) Factory {
	return Factory{
		Open: func(t testing.TB, dsn string) executor.Executor {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return broken(cairnqpgx.New(pool, nil))
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(interface{ pool() *pgxpool.Pool }).pool().Ping(ctx)
		},
	}
}

// certifyRecorded certifies f and returns the failures by check. The
// scenarios are skipped: they would only add failures downstream of the
// contract checks, and most of the time.
func certifyRecorded(t *testing.T, f Factory) map[string][]string {
	rec := &recorder{t: t, log: &failureLog{byCheck: map[string][]string{}}, skip: "scenarios"}
	func() {
		defer endFatal()
		certify(rec, f)
	}()
	rec.log.mu.Lock()
	defer rec.log.mu.Unlock()
	return rec.log.byCheck
}

// recorder is a reporter that records failures, keyed by the check's path
// under the certification, instead of failing the test.
type recorder struct {
	t    *testing.T
	path string
	log  *failureLog
	skip string // a subtest not to run
}

type failureLog struct {
	mu      sync.Mutex
	byCheck map[string][]string
}

// fatal is what Fatalf panics with to end a check; run recovers it.
type fatal struct{}

func endFatal() {
	if v := recover(); v != nil {
		if _, ok := v.(fatal); !ok {
			panic(v)
		}
	}
}

func (r *recorder) Helper()                          { r.t.Helper() }
func (r *recorder) Logf(format string, args ...any)  { r.t.Logf(format, args...) }
func (r *recorder) Skipf(format string, args ...any) { r.t.Skipf(format, args...) }
func (r *recorder) test() *testing.T                 { return r.t }

func (r *recorder) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.t.Logf("recorded failure: %s", msg)
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	r.log.byCheck[r.path] = append(r.log.byCheck[r.path], msg)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatal{})
}

func (r *recorder) run(name string, fn func(r reporter)) {
	if name == r.skip {
		return
	}
	r.t.Run(name, func(t *testing.T) {
		defer endFatal()
		fn(&recorder{t: t, path: path.Join(r.path, name), log: r.log, skip: r.skip})
	})
}

// passThrough forwards everything, LISTEN included, to a good executor.
type passThrough struct{ executor.Executor }

func (p passThrough) pool() *pgxpool.Pool { return p.Executor.(*cairnqpgx.Executor).Pool() }

func (p passThrough) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	return p.Executor.(executor.Listener).Listen(ctx, channels, onNotify)
}

// commitsOnError commits whatever fn did, even when fn fails.
type commitsOnError struct{ passThrough }

func (e commitsOnError) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	var fnErr error
	err := e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		fnErr = fn(ctx, s)
		return nil
	})
	if err != nil {
		return err
	}
	return fnErr
}

// dropsNulls binds nil arguments as "" and leaves NULL columns out of
// rows, on the pool and in transactions.
type dropsNulls struct{ passThrough }

func (e dropsNulls) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	return queryDroppingNulls(ctx, e.Executor, sql, args)
}

func (e dropsNulls) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, nullDroppingSession{s})
	})
}

type nullDroppingSession struct{ executor.Session }

func (s nullDroppingSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	return queryDroppingNulls(ctx, s.Session, sql, args)
}

func queryDroppingNulls(ctx context.Context, s executor.Session, sql string, args []any) ([]executor.Row, error) {
	bound := slices.Clone(args)
	for i, a := range bound {
		if a == nil {
			bound[i] = ""
		}
	}
	rows, err := s.Query(ctx, sql, bound...)
	for _, row := range rows {
		for col, v := range row {
			if v == nil {
				delete(row, col)
			}
		}
	}
	return rows, err
}

// leaksTx hands fn a session that runs on the pool, outside the
// transaction it opened.
type leaksTx struct{ passThrough }

func (e leaksTx) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.Executor.Tx(ctx, func(ctx context.Context, _ executor.Session) error {
		return fn(ctx, e.Executor)
	})
}

// misplacesRows returns its rows by position one column off, the last
// value of each row first.
type misplacesRows struct{ passThrough }

func (e misplacesRows) QueryPositional(ctx context.Context, sql string, args ...any) (*executor.Rows, error) {
	rows, err := e.Executor.(executor.PositionalQuerier).QueryPositional(ctx, sql, args...)
	if err != nil || len(rows.Columns) == 0 {
		return rows, err
	}
	for _, row := range rows.Values {
		last := row[len(row)-1]
		copy(row[1:], row[:len(row)-1])
		row[0] = last
	}
	return rows, nil
}

// dropsCopiedRow's transaction sessions copy every row but the last and
// report them all copied.
type dropsCopiedRow struct{ passThrough }

func (e dropsCopiedRow) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, dropsRowSession{s})
	})
}

type dropsRowSession struct{ executor.Session }

func (s dropsRowSession) CopyFrom(ctx context.Context, table string, columns []string, rows executor.CopyRows) (int64, error) {
	var all [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return 0, err
		}
		all = append(all, slices.Clone(v))
	}
	if _, err := s.Session.(executor.Copier).CopyFrom(ctx, table, columns, &sliceRows{rows: all[:len(all)-1]}); err != nil {
		return 0, err
	}
	return int64(len(all)), nil
}

// copiesApart's transaction sessions run each COPY in a transaction of
// its own, which commits whatever the session's does.
type copiesApart struct{ passThrough }

func (e copiesApart) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, apartSession{s, e.Executor})
	})
}

type apartSession struct {
	executor.Session
	ex executor.Executor
}

func (s apartSession) CopyFrom(ctx context.Context, table string, columns []string, rows executor.CopyRows) (n int64, err error) {
	err = s.ex.Tx(ctx, func(ctx context.Context, own executor.Session) error {
		n, err = own.(executor.Copier).CopyFrom(ctx, table, columns, rows)
		return err
	})
	return n, err
}

// decodesJSONB decodes json and jsonb columns into Go values, scalars
// included, as pgx's Rows.Values does.
type decodesJSONB struct{ passThrough }

func (e decodesJSONB) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	rows, err := e.Executor.Query(ctx, sql, args...)
	for _, row := range rows {
		for col, v := range row {
			if raw, ok := v.(json.RawMessage); ok {
				var decoded any
				if json.Unmarshal(raw, &decoded) == nil {
					row[col] = decoded
				}
			}
		}
	}
	return rows, err
}

// flattensErrors returns errors as text, losing the server's SQLSTATE.
type flattensErrors struct{ passThrough }

func (e flattensErrors) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	rows, err := e.Executor.Query(ctx, sql, args...)
	return rows, flatten(err)
}

func (e flattensErrors) Exec(ctx context.Context, script string) error {
	return flatten(e.Executor.Exec(ctx, script))
}

func flatten(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(err.Error())
}

// closesAppPool closes the application's pool with the executor.
type closesAppPool struct{ passThrough }

func (e closesAppPool) Close() error {
	err := e.Executor.Close()
	e.pool().Close()
	return err
}
