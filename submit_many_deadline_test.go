package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
	"github.com/cairnq/cairnq-go/protocol"
)

// TestSubmitManyDeadline gives a 10,000-item SubmitMany a deadline far
// shorter than the batch takes: the deadline ends the call with the
// context's error, nothing of the batch is written, and nothing is logged
// at WARN or above. On Postgres the context ends in the middle of the
// batch's insert (a sleep the executor runs in its place), which makes
// pgx close the connection to stop the statement: the rollback that then
// fails is the deadline's expected end, not a failure to warn of. (On
// SQLite, internal/engine's TestSubmitManyDeadlineMidWriteSQLite ends a
// batch the writer has started.)
func TestSubmitManyDeadline(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		var buf syncbuf.Buffer
		c := openLogged(t, filepath.Join(t.TempDir(), "q.db"), &buf)
		for _, d := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			submitManyPastDeadline(t, c, ctx, &buf)
			cancel()
		}
	})
	t.Run("postgres", func(t *testing.T) {
		var buf syncbuf.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx := context.Background()
		ex, err := cairnqpgx.Open(ctx, pgtest.DSN(t), &cairnqpgx.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		cut := &cutInsert{Executor: ex}
		c, err := cairnq.OpenPostgres(ctx, cut, &cairnq.PostgresOptions{Options: cairnq.Options{Logger: log}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		bctx, expire := context.WithCancelCause(ctx)
		cut.arm(func() { expire(context.DeadlineExceeded) })
		submitManyPastDeadline(t, c, bctx, &buf)
		if !cut.cut.Load() {
			t.Error("the batch's insert never ran: the context ended before it")
		}
	})
}

// submitManyPastDeadline submits 10,000 items under ctx, which ends
// before they can be written, and checks the outcome.
func submitManyPastDeadline(t *testing.T, c *cairnq.Client, ctx context.Context, log *syncbuf.Buffer) {
	t.Helper()
	items := make([]cairnq.SubmitItem, 10_000)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: "bulk", Payload: map[string]int{"i": i}}
	}
	before := countTasks(t, c)
	tasks, err := c.SubmitMany(ctx, items)
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%d tasks, err %v; want the context's end to end the call", len(tasks), err)
	}
	if n := countTasks(t, c) - before; n != 0 {
		t.Errorf("%d tasks written; want nothing of a batch whose call failed", n)
	}
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("logged: %s", line)
		}
	}
	// The client still works: the deadline cost nothing but the batch.
	if _, err := c.SubmitMany(context.Background(), items[:10]); err != nil {
		t.Fatal(fmt.Errorf("a batch after the deadline: %w", err))
	}
}

// cutInsert is a real executor whose transactions run, in place of the
// first insert_many once armed, a sleep that ends only when the context
// does, after ending it with end: a deadline that passes in the middle of
// the batch's insert, every time.
type cutInsert struct {
	executor.Executor
	end atomic.Pointer[func()]
	cut atomic.Bool
}

func (c *cutInsert) arm(end func()) { c.end.Store(&end) }

func (c *cutInsert) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return c.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, cutSession{s, c})
	})
}

type cutSession struct {
	executor.Session
	c *cutInsert
}

var insertManySQL = protocol.Statements(protocol.Postgres).Get("insert_many").SQL

func (s cutSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	if sql == insertManySQL {
		if end := s.c.end.Swap(nil); end != nil {
			s.c.cut.Store(true)
			go s.c.endOnceSleeping(*end)
			return s.Session.Query(ctx, cutSleep)
		}
	}
	return s.Session.Query(ctx, sql, args...)
}

const cutSleep = "SELECT pg_sleep(60) AS cut"

// endOnceSleeping calls end once the server runs cutSleep, so that the
// context ends in the middle of a statement, not before it is sent.
func (c *cutInsert) endOnceSleeping(end func()) {
	defer end()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		rows, err := c.Executor.Query(context.Background(),
			"SELECT count(*) AS n FROM pg_stat_activity WHERE query = $1 AND state = 'active'", cutSleep)
		if err == nil && len(rows) == 1 && fmt.Sprint(rows[0]["n"]) == "1" {
			return
		}
	}
}

// TestSubmitManyTxDeadlineBeforeRelease ends SubmitManyTx's context as
// it releases its savepoint, after the batch's statements: the call and
// the application's transaction must agree. Before, the release failed
// on the ended context and the call returned its error while the whole
// batch stayed in the transaction, which then committed it.
func TestSubmitManyTxDeadlineBeforeRelease(t *testing.T) {
	c, app := openPostgresApp(t, nil)
	ctx := context.Background()
	bctx, expire := context.WithCancelCause(ctx)
	var tasks []*cairnq.Task
	var callErr error
	err := app.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		tasks, callErr = c.SubmitManyTx(bctx, endBeforeRelease{sess, func() { expire(context.DeadlineExceeded) }},
			[]cairnq.SubmitItem{{Name: "bulk"}, {Name: "bulk"}, {Name: "bulk"}})
		return nil // the application commits what else it wrote
	})
	if err != nil {
		t.Fatal(err)
	}
	n := countTasks(t, c)
	switch {
	case callErr == nil && (len(tasks) != 3 || n != 3):
		t.Errorf("SubmitManyTx returned %d tasks and nil; %d committed", len(tasks), n)
	case callErr != nil && n != 0:
		t.Errorf("SubmitManyTx failed (%v), yet %d of its tasks committed with the application's transaction", callErr, n)
	}
}

// endBeforeRelease is an application's session that ends the batch's
// context (end) as SubmitManyTx releases its savepoint.
type endBeforeRelease struct {
	executor.Session
	end func()
}

func (s endBeforeRelease) Exec(ctx context.Context, script string) error {
	if strings.HasPrefix(script, "RELEASE SAVEPOINT") {
		s.end()
	}
	return s.Session.Exec(ctx, script)
}
