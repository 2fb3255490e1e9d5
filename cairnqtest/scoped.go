package cairnqtest

import (
	"context"
	"fmt"

	"github.com/cairnq/cairnq-go/executor"
)

// scoped runs every statement of an application's executor with
// search_path set to one schema: each transaction starts with SET LOCAL,
// and a statement outside one runs in a transaction of its own. The
// application's pool and its connections' settings stay untouched, so
// tests sharing the pool in other schemas do not see each other.
type scoped struct {
	ex     executor.Executor
	schema string // a validated identifier (newSchemaName)
}

// scopedListener is scoped over an executor that can LISTEN.
// Notification channels are not per schema: a notification from another
// test's schema is a spurious wakeup, which costs one read.
type scopedListener struct {
	*scoped
	l executor.Listener
}

func (s *scopedListener) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	return s.l.Listen(ctx, channels, onNotify)
}

// scope returns ex confined to schema, keeping its LISTEN capability.
func scope(ex executor.Executor, schema string) executor.Executor {
	s := &scoped{ex: ex, schema: schema}
	if l, ok := ex.(executor.Listener); ok {
		return &scopedListener{scoped: s, l: l}
	}
	return s
}

func (s *scoped) enter(ctx context.Context, sess executor.Session) error {
	if err := sess.Exec(ctx, "SET LOCAL search_path TO "+s.schema); err != nil {
		return fmt.Errorf("cairnqtest: setting search_path to schema %s: %w", s.schema, err)
	}
	return nil
}

func (s *scoped) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	var rows []executor.Row
	err := s.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		var err error
		rows, err = sess.Query(ctx, sql, args...)
		return err
	})
	return rows, err
}

func (s *scoped) Exec(ctx context.Context, script string) error {
	return s.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		return sess.Exec(ctx, script)
	})
}

// Tx hands fn the application executor's own session, so that the
// adapters' typed helpers (cairnqpgx.PgxTx, ...) still find the driver's
// transaction in it.
func (s *scoped) Tx(ctx context.Context, fn func(ctx context.Context, sess executor.Session) error) error {
	return s.ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		if err := s.enter(ctx, sess); err != nil {
			return err
		}
		return fn(ctx, sess)
	})
}

// Close leaves the application's executor open: it is the caller's.
func (s *scoped) Close() error { return nil }
