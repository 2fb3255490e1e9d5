package conformance

// The statement checks: Exec runs whole multi-statement scripts
// (multi_statement_exec), and a server error keeps its SQLSTATE
// (sqlstate_errors).

import (
	"context"
	"errors"
	"slices"

	"github.com/cairnq/cairnq-go/executor"
)

// multiStatementExec: Exec runs a whole script, statements with semicolons
// in function bodies included, on the pool and in a Tx session.
func (s *suite) multiStatementExec(r reporter) {
	e := s.setup(r)
	const fix = "Fix: send the script whole, as one simple-protocol query without arguments (database/sql: ExecContext with no args; pgx: QueryExecModeSimpleProtocol); never prepare it or split it on semicolons (function bodies hold them)"
	script := `CREATE TABLE cairnq_certify_multi (v integer);
INSERT INTO cairnq_certify_multi (v) VALUES (1);
CREATE FUNCTION cairnq_certify_times_ten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.v := NEW.v * 10; -- a semicolon inside a body
    RETURN NEW;
END;
$$;
CREATE TRIGGER cairnq_certify_times_ten BEFORE INSERT ON cairnq_certify_multi
    FOR EACH ROW EXECUTE FUNCTION cairnq_certify_times_ten();
INSERT INTO cairnq_certify_multi (v) VALUES (2);`
	if err := e.ex.Exec(e.ctx, script); err != nil {
		r.Fatalf("Exec of a multi-statement script (a migration's shape) failed: %v. %s", err, fix)
	}
	values := func() []int64 {
		rows, err := e.ex.Query(e.ctx, "SELECT v FROM cairnq_certify_multi ORDER BY v")
		if err != nil {
			r.Fatalf("reading back what the script wrote: %v", err)
		}
		var out []int64
		for _, row := range rows {
			n, err := int8Value(column(r, row, "v"))
			if err != nil {
				r.Fatalf("integer column v: %v", err)
			}
			out = append(out, n)
		}
		return out
	}
	if got := values(); !slices.Equal(got, []int64{1, 20}) {
		r.Fatalf("after Exec the table holds %v, want [1 20]: every statement of the script must run, in order. %s", got, fix)
	}
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		return sess.Exec(ctx, "INSERT INTO cairnq_certify_multi (v) VALUES (3); INSERT INTO cairnq_certify_multi (v) VALUES (4);")
	})
	if err != nil {
		r.Fatalf("Exec of a two-statement script in a Tx session failed: %v. %s", err, fix)
	}
	if got := values(); !slices.Equal(got, []int64{1, 20, 30, 40}) {
		r.Fatalf("after Exec in a Tx session the table holds %v, want [1 20 30 40]. %s", got, fix)
	}
	err = e.ex.Exec(e.ctx, "INSERT INTO cairnq_certify_multi (v) VALUES (5); SELECT * FROM cairnq_certify_missing;")
	if err == nil {
		r.Fatalf("Exec of a script whose second statement fails returned nil. Fix: return the server's error")
	}
	if got := values(); !slices.Equal(got, []int64{1, 20, 30, 40}) {
		r.Errorf("a failing script left its earlier statements committed (the table holds %v): the statements ran one by one. %s; Postgres then runs it as one implicit transaction", got, fix)
	}
}

// sqlstateErrors: a server error keeps its SQLSTATE reachable through
// errors.As, which is how the store tells a lost migration race from a
// real failure.
func (s *suite) sqlstateErrors(r reporter) {
	e := s.setup(r)
	const fix = "Fix: wrap the driver's error with %%w (pgx's *pgconn.PgError and lib/pq's *pq.Error have a SQLState method), or give your error type a SQLState() string method"
	state := func(op string, err error, want string) {
		r.Helper()
		if err == nil {
			r.Errorf("%s succeeded, but the server fails it with SQLSTATE %s. Fix: return the server's error", op, want)
			return
		}
		var se interface{ SQLState() string }
		if !errors.As(err, &se) {
			r.Errorf("%s failed with %q, whose SQLSTATE errors.As(err, &x) cannot find (x an interface{ SQLState() string }); the store recognizes 42P07 and 23505 that way. "+fix, op, err)
			return
		}
		if got := se.SQLState(); got != want {
			r.Errorf("%s failed with SQLSTATE %q, want %q. Fix: report the server's own SQLSTATE", op, got, want)
		}
	}
	_, err := e.ex.Query(e.ctx, "SELECT * FROM cairnq_certify_missing")
	state("Query of a missing table", err, "42P01")
	exec(r, e, "CREATE TABLE cairnq_certify_twice (v integer)")
	state("Exec of CREATE TABLE for an existing table", e.ex.Exec(e.ctx, "CREATE TABLE cairnq_certify_twice (v integer)"), "42P07")
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		_, err := sess.Query(ctx, "SELECT * FROM cairnq_certify_missing")
		return err
	})
	state("Tx whose session queried a missing table", err, "42P01")
}
