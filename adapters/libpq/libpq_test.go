package cairnqlibpq_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, dsn string, opts *cairnqlibpq.Options) *cairnqlibpq.Executor {
	t.Helper()
	e, err := cairnqlibpq.Open(adaptertest.Ctx(t), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func countRows(t *testing.T, ctx context.Context, s executor.Session, from string) int64 {
	t.Helper()
	return adaptertest.QueryOne(t, ctx, s, "SELECT count(*) AS n FROM "+from)["n"].(int64)
}

// appDB opens the application's own *sql.DB on dsn, closed at cleanup;
// database/sql connects only when it is used.
func appDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestQueryExecTx(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	e := open(t, pgtest.DSN(t), nil)

	if err := e.Exec(ctx, `CREATE TABLE jobs (id int8 PRIMARY KEY, doc jsonb NOT NULL, ok bool);
		INSERT INTO jobs VALUES (1, '{"a": [1]}', true)`); err != nil {
		t.Fatal(err)
	}
	row := adaptertest.QueryOne(t, ctx, e, "SELECT id, doc, ok, NULL::text AS nothing FROM jobs WHERE id = $1", int64(1))
	want := executor.Row{"id": int64(1), "doc": []byte(`{"a": [1]}`), "ok": true, "nothing": nil}
	if !reflect.DeepEqual(row, want) {
		t.Fatalf("row = %#v, want %#v", row, want)
	}
	rows, err := e.Query(ctx, "SELECT id FROM jobs WHERE id = ANY($1::int8[])", "{7,8}")
	if err != nil || rows == nil || len(rows) != 0 {
		t.Fatalf("no rows: %#v, %v", rows, err)
	}

	err = e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		if _, err := s.Query(ctx, "INSERT INTO jobs VALUES ($1, $2::jsonb, $3)", int64(2), `{"b":2}`, nil); err != nil {
			return err
		}
		if tx, ok := cairnqlibpq.TxOf(s); !ok || tx == nil {
			t.Error("TxOf: no *sql.Tx behind the Tx session")
		}
		if countRows(t, ctx, e, "jobs WHERE id = 2") != 0 {
			t.Error("the pool sees an uncommitted row")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		if err := s.Exec(ctx, "DELETE FROM jobs"); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Tx = %v, want fn's error", err)
	}
	if n := countRows(t, ctx, e, "jobs"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	if _, ok := cairnqlibpq.TxOf(e); ok {
		t.Fatal("TxOf reports a transaction behind the pool")
	}
	if e.Native() != any(e.DB()) {
		t.Fatal("Native is not DB")
	}

	// Close closes the pool Open made.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.DB().PingContext(ctx); err == nil {
		t.Fatal("the pool Open made is still open after Close")
	}
}

func TestErrorsKeepPQError(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	e := open(t, pgtest.DSN(t), nil)
	for name, run := range map[string]func() error{
		"query": func() error { _, err := e.Query(ctx, "SELECT * FROM missing"); return err },
		"exec":  func() error { return e.Exec(ctx, "SELECT 1; SELECT * FROM missing") },
		"tx": func() error {
			return e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
				_, err := s.Query(ctx, "SELECT * FROM missing WHERE x = $1", int64(1))
				return err
			})
		},
	} {
		err := run()
		var pqErr *pq.Error
		if !errors.As(err, &pqErr) {
			t.Errorf("%s: %v is not a *pq.Error", name, err)
			continue
		}
		if pqErr.Code != "42P01" || pqErr.SQLState() != "42P01" {
			t.Errorf("%s: code %q", name, pqErr.Code)
		}
		if !strings.HasPrefix(err.Error(), "cairnq: ") {
			t.Errorf("%s: %q is not wrapped as cairnq: <op>: ...", name, err)
		}
	}
}

// A pool Open makes keeps cairnq's statements prepared, unless NoPrepare;
// an application's pool given to New is never prepared on.
func TestOpenPreparesStatements(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		name string
		ex   func(t *testing.T) *cairnqlibpq.Executor
		want int64
	}{
		{"Open", func(t *testing.T) *cairnqlibpq.Executor { return open(t, dsn, nil) }, 1},
		{"Open NoPrepare", func(t *testing.T) *cairnqlibpq.Executor {
			return open(t, dsn, &cairnqlibpq.Options{NoPrepare: true})
		}, 0},
		{"New", func(t *testing.T) *cairnqlibpq.Executor { return cairnqlibpq.New(appDB(t, dsn), dsn, nil) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := adaptertest.Ctx(t)
			e := tc.ex(t)
			e.DB().SetMaxOpenConns(1) // so that the count below reads the connection that ran it
			for i := range 3 {
				if row := adaptertest.QueryOne(t, ctx, e, "SELECT $1::int8 AS x", int64(i)); row["x"] != int64(i) {
					t.Fatalf("x = %#v, want %d", row["x"], i)
				}
			}
			var n int64
			if err := e.DB().QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("%d statements prepared on the connection after 3 runs of one, want %d", n, tc.want)
			}
		})
	}
}

func TestNewLeavesAppDBOpen(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	dsn := pgtest.DSN(t)
	db := appDB(t, dsn)
	e := cairnqlibpq.New(db, dsn, &cairnqlibpq.Options{Schema: "ignored_by_new"})
	if e.DB() != db {
		t.Fatal("DB is not the app's db")
	}
	// current_schema() is of type name, which lib/pq returns as []byte.
	if row := adaptertest.QueryOne(t, ctx, e, "SELECT current_schema()::text AS s"); row["s"] != "public" {
		t.Fatalf("New changed the app's search_path: %v", row["s"])
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("the app's db after Close: %v", err)
	}
}

func TestTxSessionJoinsAppTransaction(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	dsn := pgtest.DSN(t)
	db := appDB(t, dsn)
	e := cairnqlibpq.New(db, dsn, nil)
	if err := e.Exec(ctx, "CREATE TABLE t (id int8 PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	s := cairnqlibpq.TxSession(tx)
	if got, ok := cairnqlibpq.TxOf(s); !ok || got != tx {
		t.Fatal("TxOf(TxSession(tx)) is not tx")
	}
	if _, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(2)); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, ctx, s, "t"); n != 2 {
		t.Fatalf("the session sees %d rows, want 2", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, ctx, e, "t"); n != 0 {
		t.Fatalf("%d rows survive the app's rollback", n)
	}
}

// withParams adds query parameters to a URL DSN.
func withParams(t *testing.T, dsn string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestSchemaOnEveryConnection(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	const schema = "Cairnq_Jobs" // mixed case: quoting must keep it
	// The DSN asks for another search_path twice over; Schema wins.
	dsn := withParams(t, pgtest.DSN(t), "search_path", "public", "options", "-c search_path=public")
	e := open(t, dsn, &cairnqlibpq.Options{Schema: schema})

	const conns = 6
	e.DB().SetMaxOpenConns(conns)
	held := make([]*sql.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	// Hold every connection at once, so each is a distinct backend; open
	// them concurrently, as a busy application would.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c, err := e.DB().Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(held) != conns {
		t.Fatalf("held %d connections, want %d", len(held), conns)
	}
	pids := map[int]bool{}
	for _, c := range held {
		var pid int
		var current, path string
		if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid(), current_schema(), current_setting('search_path')").
			Scan(&pid, &current, &path); err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
		if current != schema || path != `"Cairnq_Jobs"` {
			t.Errorf("backend %d: current_schema %q, search_path %q", pid, current, path)
		}
	}
	if len(pids) != conns {
		t.Fatalf("%d distinct backends, want %d", len(pids), conns)
	}
	for _, c := range held {
		_ = c.Close()
	}
	held = nil

	// Unqualified DDL and statements land in the schema.
	if err := e.Exec(ctx, "CREATE TABLE jobs (id int8); INSERT INTO jobs VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	row := adaptertest.QueryOne(t, ctx, e, "SELECT table_schema::text FROM information_schema.tables WHERE table_name = 'jobs'")
	if row["table_schema"] != schema {
		t.Fatalf("table created in %v", row["table_schema"])
	}
	// Opening again finds the schema in place.
	e2 := open(t, dsn, &cairnqlibpq.Options{Schema: schema})
	if n := countRows(t, ctx, e2, "jobs"); n != 1 {
		t.Fatalf("second Open sees %d rows", n)
	}
}

func TestSchemaConcurrentOpens(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			e, err := cairnqlibpq.Open(adaptertest.Ctx(t), dsn, &cairnqlibpq.Options{Schema: "raced"})
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
				return
			}
			_ = e.Close()
		})
	}
	wg.Wait()
}

func TestSchemaNameValidatedBeforeConnecting(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a connection attempt would fail differently.
	dsn := "host=127.0.0.1 port=1 user=x dbname=x sslmode=disable connect_timeout=1"
	for _, name := range []string{
		"1abc", "a-b", `a"b`, "a;drop schema public", "ü", " a", "a b", "a$b",
		strings.Repeat("a", 64),
	} {
		_, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: name})
		if err == nil || !strings.Contains(err.Error(), "not a plain identifier") {
			t.Errorf("Schema %q: %v, want a validation error", name, err)
		}
	}
	// The longest valid name opens against a real server.
	open(t, pgtest.DSN(t), &cairnqlibpq.Options{Schema: "_" + strings.Repeat("a", 62)})
}

func TestSchemaExistingWithoutCreatePrivilege(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	dsn := pgtest.DSN(t)
	admin := open(t, dsn, nil)
	role := "cairnq_limited_" + randomHex(4)
	if err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN; CREATE SCHEMA app AUTHORIZATION "+role); err != nil {
		t.Skipf("cannot create a role on this server: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.Exec(context.Background(), "DROP SCHEMA app CASCADE; DROP ROLE "+role)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	limited := u.String()

	// The role may not CREATE in the database, but its schema exists.
	e := open(t, limited, &cairnqlibpq.Options{Schema: "app"})
	if err := e.Exec(ctx, "CREATE TABLE jobs (id int8)"); err != nil {
		t.Fatal(err)
	}
	_, err = cairnqlibpq.Open(ctx, limited, &cairnqlibpq.Options{Schema: "elsewhere"})
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "42501" {
		t.Fatalf("Open with a schema the role may not create: %v, want 42501", err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// --- LISTEN. These tests do not run in parallel: they count the listener
// goroutines of the whole test binary.

// collector receives notifications on a channel a test can wait on.
type collector struct{ ch chan adaptertest.Note }

func newCollector() *collector { return &collector{ch: make(chan adaptertest.Note, 64)} }

func (c *collector) onNotify(channel, payload string) {
	c.ch <- adaptertest.Note{Channel: channel, Payload: payload}
}

func (c *collector) next(t *testing.T) adaptertest.Note {
	t.Helper()
	return adaptertest.Recv(t, c.ch)
}

func notify(t *testing.T, ctx context.Context, e executor.Session, channel, payload string) {
	t.Helper()
	if _, err := e.Query(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// listenerBackends returns the pids of this database's sessions whose last
// statement was a LISTEN.
func listenerBackends(t *testing.T, ctx context.Context, e executor.Session) []int64 {
	t.Helper()
	rows, err := e.Query(ctx, `SELECT pid::int8 AS pid FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for _, r := range rows {
		pids = append(pids, r["pid"].(int64))
	}
	return pids
}

// awaitOneListener polls until exactly one backend of the test's database
// LISTENs and the backend gone (0: none) has left pg_stat_activity, and
// returns the listening one. A terminated backend leaves pg_stat_activity
// as it exits, which can be after its client saw the connection end and
// reconnected: right after OnReconnect it may still be listed, so a single
// look is a race.
func awaitOneListener(t *testing.T, ctx context.Context, e executor.Session, gone int64) int64 {
	t.Helper()
	deadline := time.Now().Add(adaptertest.WaitTimeout)
	for {
		pids := listenerBackends(t, ctx, e)
		left := gone == 0 ||
			adaptertest.QueryOne(t, ctx, e, "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1::int4", gone)["n"] == int64(0)
		if left && len(pids) == 1 {
			return pids[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: listener backends %v, backend %d gone: %v; want exactly one listener",
				adaptertest.WaitTimeout, pids, gone, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listenerGoroutines returns the stacks of goroutines belonging to a
// listener: lib/pq's and this adapter's.
func listenerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lib/pq.(*Listener") || strings.Contains(g, "lib/pq.(*ListenerConn") ||
			strings.Contains(g, "adapters/libpq.(") {
			out = append(out, g)
		}
	}
	return out
}

// requireNoListenerGoroutines fails when listener goroutines remain. After a
// stop that has returned, the only ones allowed are exiting: lib/pq's last
// statements are a channel close, so a few are polled away.
func requireNoListenerGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		gs := listenerGoroutines()
		if len(gs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listener goroutines outlive stop:\n%s", len(gs), strings.Join(gs, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestListenRequestedChannelsOnlyAndStop(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	e := open(t, pgtest.DSN(t), nil)
	c := newCollector()
	stop, err := e.Listen(ctx, []string{"alpha", "Beta", "alpha"}, c.onNotify)
	if err != nil {
		t.Fatal(err)
	}
	if len(listenerGoroutines()) == 0 {
		t.Fatal("no listener goroutine found: the leak check below would prove nothing")
	}
	notify(t, ctx, e, "alpha", "1")
	notify(t, ctx, e, "gamma", "not listened")
	notify(t, ctx, e, "beta", "wrong case")
	notify(t, ctx, e, "Beta", "2")
	notify(t, ctx, e, "Beta", "end")
	var got []adaptertest.Note
	for {
		n := c.next(t)
		got = append(got, n)
		if n.Payload == "end" {
			break
		}
	}
	want := []adaptertest.Note{{Channel: "alpha", Payload: "1"}, {Channel: "Beta", Payload: "2"}, {Channel: "Beta", Payload: "end"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	awaitOneListener(t, ctx, e, 0)

	stop()
	requireNoListenerGoroutines(t)
	adaptertest.Poll(t, "the listener's backend to go", func() bool { return len(listenerBackends(t, ctx, e)) == 0 })
	notify(t, ctx, e, "alpha", "after stop")
	select {
	case n := <-c.ch:
		t.Fatalf("notification after stop: %v", n)
	default:
	}
	stop() // a second stop is harmless
}

func TestListenReconnectsAfterTerminate(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	reconnected := make(chan struct{}, 8)
	e := open(t, pgtest.DSN(t), &cairnqlibpq.Options{
		OnReconnect:          func() { reconnected <- struct{}{} },
		MinReconnectInterval: 10 * time.Millisecond,
		MaxReconnectInterval: 200 * time.Millisecond,
	})
	c := newCollector()
	stop, err := e.Listen(ctx, []string{"cairnq_queued", "cairnq_done"}, c.onNotify)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	notify(t, ctx, e, "cairnq_queued", "before")
	if n := c.next(t); n != (adaptertest.Note{Channel: "cairnq_queued", Payload: "before"}) {
		t.Fatalf("got %v", n)
	}

	pid := awaitOneListener(t, ctx, e, 0)
	row := adaptertest.QueryOne(t, ctx, e, "SELECT pg_terminate_backend($1::int4) AS ok", pid)
	if row["ok"] != true {
		t.Fatalf("pg_terminate_backend(%d) = %v", pid, row["ok"])
	}
	select {
	case <-reconnected:
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatal("OnReconnect was not called")
	}
	// OnReconnect comes after the listener subscribed again: a NOTIFY sent
	// now is delivered, on both channels.
	notify(t, ctx, e, "cairnq_done", "after")
	notify(t, ctx, e, "cairnq_queued", "after")
	want := []adaptertest.Note{{Channel: "cairnq_done", Payload: "after"}, {Channel: "cairnq_queued", Payload: "after"}}
	if got := []adaptertest.Note{c.next(t), c.next(t)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after reconnecting got %v", got)
	}
	// The terminated backend may linger in pg_stat_activity a moment after
	// its client reconnected: wait for it to leave.
	awaitOneListener(t, ctx, e, pid)
	stop()
	requireNoListenerGoroutines(t)
}

func TestCloseStopsListeners(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	dsn := pgtest.DSN(t)
	db := appDB(t, dsn)
	e := cairnqlibpq.New(db, dsn, nil)
	stop1, err := e.Listen(ctx, []string{"a"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	stop2, err := e.Listen(ctx, []string{"b"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	stop1()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	requireNoListenerGoroutines(t)
	stop2() // already stopped by Close: returns at once
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("Close closed the app's db: %v", err)
	}
	_, err = e.Listen(ctx, []string{"a"}, func(string, string) {})
	if !errors.Is(err, executor.ErrListenUnavailable) {
		t.Fatalf("Listen after Close = %v, want ErrListenUnavailable", err)
	}
}

func TestListenUnavailable(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	onNotify := func(string, string) {}

	t.Run("no DSN", func(t *testing.T) {
		e := cairnqlibpq.New(appDB(t, "sslmode=disable"), "", nil)
		_, err := e.Listen(ctx, []string{"a"}, onNotify)
		if !errors.Is(err, executor.ErrListenUnavailable) {
			t.Fatalf("Listen = %v, want ErrListenUnavailable", err)
		}
	})
	t.Run("DSN that does not parse", func(t *testing.T) {
		e := cairnqlibpq.New(appDB(t, "sslmode=disable"), "postgres://h/db?sslmode=bogus", nil)
		_, err := e.Listen(ctx, []string{"a"}, onNotify)
		if !errors.Is(err, executor.ErrListenUnavailable) {
			t.Fatalf("Listen = %v, want ErrListenUnavailable", err)
		}
	})
	t.Run("no channels", func(t *testing.T) {
		e := cairnqlibpq.New(appDB(t, "sslmode=disable"), "sslmode=disable", nil)
		stop, err := e.Listen(ctx, nil, onNotify)
		if err != nil {
			t.Fatal(err)
		}
		stop()
	})
	for _, code := range []string{"0A000", "25006"} {
		t.Run("server refuses LISTEN with "+code, func(t *testing.T) {
			fake := startFakeServer(t, fakeRefuseListen, code)
			e := cairnqlibpq.New(appDB(t, fake.dsn()), fake.dsn(), nil)
			_, err := e.Listen(ctx, []string{"cairnq_queued"}, onNotify)
			if !errors.Is(err, executor.ErrListenUnavailable) {
				t.Fatalf("Listen = %v, want ErrListenUnavailable", err)
			}
			var pqErr *pq.Error
			if !errors.As(err, &pqErr) || string(pqErr.Code) != code {
				t.Fatalf("Listen = %v, want the server's *pq.Error %s", err, code)
			}
			requireNoListenerGoroutines(t)
		})
	}
	t.Run("terminated during LISTEN is not permanent", func(t *testing.T) {
		fake := startFakeServer(t, fakeRefuseListen, "57P01")
		e := cairnqlibpq.New(appDB(t, fake.dsn()), fake.dsn(), nil)
		_, err := e.Listen(ctx, []string{"cairnq_queued"}, onNotify)
		if err == nil || errors.Is(err, executor.ErrListenUnavailable) {
			t.Fatalf("Listen = %v, want a transient error", err)
		}
		requireNoListenerGoroutines(t)
	})
	t.Run("server down is not permanent", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable", port)
		e := cairnqlibpq.New(appDB(t, dsn), dsn, nil)
		_, err = e.Listen(ctx, []string{"a"}, onNotify)
		if err == nil || errors.Is(err, executor.ErrListenUnavailable) {
			t.Fatalf("Listen = %v, want a transient error", err)
		}
		requireNoListenerGoroutines(t)
	})
	t.Run("silent server: ctx ends the wait", func(t *testing.T) {
		fake := startFakeServer(t, fakeSilent, "")
		e := cairnqlibpq.New(appDB(t, fake.dsn()), fake.dsn(), nil)
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.Listen(ctx, []string{"a"}, onNotify)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, executor.ErrListenUnavailable) {
			t.Fatalf("Listen = %v, want the context's error", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Listen took %v to give up", d)
		}
		requireNoListenerGoroutines(t)
	})
}
