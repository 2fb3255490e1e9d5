package cairnqlibpq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// The tests of this file look at one session of the listener's source: one
// pq.Listener that makes one connection, with no reconnect logic of its
// own. pglisten's loop, tested in its package, makes the sessions. Not
// parallel: they count the process's listener goroutines.

// relay is a TCP proxy to a real server that counts the connections it
// accepts and, once frozen, drops everything the server sends: a
// connection that went half-open.
type relay struct {
	ln       net.Listener
	network  string
	upstream string
	accepted atomic.Int32
	frozen   atomic.Bool

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
}

// startRelay starts a relay to the server dsn names, closed at cleanup, and
// returns it with a DSN that reaches the same database through it.
func startRelay(t *testing.T, dsn string) (*relay, string) {
	t.Helper()
	real, err := pq.NewConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, upstream := "tcp", net.JoinHostPort(real.Host, fmt.Sprint(real.Port))
	if strings.HasPrefix(real.Host, "/") {
		network, upstream = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", real.Host, real.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, network: network, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	t.Cleanup(r.close)
	relayed := fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable connect_timeout=10",
		ln.Addr().(*net.TCPAddr).Port, quoteValue(real.User), quoteValue(real.Password), quoteValue(real.Database))
	return r, relayed
}

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.accepted.Add(1)
		up, err := net.Dial(r.network, r.upstream)
		if err != nil || !r.track(c) || !r.track(up) {
			_ = c.Close()
			if up != nil {
				_ = up.Close()
			}
			continue
		}
		r.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
		r.wg.Go(func() {
			defer c.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 && !r.frozen.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		_ = c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
}

type sessionResult struct {
	up  bool
	err error
}

// startSession runs one session on dsn, listening on channels, and returns
// once it has subscribed, with the channel its result arrives on.
func startSession(t *testing.T, ctx context.Context, dsn, notifyDSN string, cfg pglisten.Config, channels []string, onNotify func(string, string)) <-chan sessionResult {
	t.Helper()
	l, err := pglisten.NewListener(channels, onNotify, cfg)
	if err != nil {
		t.Fatal(err)
	}
	subscribed := make(chan struct{})
	done := make(chan sessionResult, 1)
	go func() {
		up, err := cairnqlibpq.ListenSession(ctx, dsn, notifyDSN, l, func() { close(subscribed) })
		done <- sessionResult{up, err}
	}()
	select {
	case <-subscribed:
	case r := <-done:
		t.Fatalf("session ended before subscribing: up %v, %v", r.up, r.err)
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatal("session did not subscribe")
	}
	return done
}

// awaitSession waits for the session's result.
func awaitSession(t *testing.T, done <-chan sessionResult) sessionResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatal("the session did not end")
		return sessionResult{}
	}
}

func quietConfig() pglisten.Config {
	return pglisten.Config{LogPrefix: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestSessionMakesOneConnection: a connection attempt that fails ends the
// session, and pq's listener does not try again on its own.
func TestSessionMakesOneConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close() // before the server's first byte
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable connect_timeout=10", ln.Addr().(*net.TCPAddr).Port)
	l, err := pglisten.NewListener([]string{"a"}, func(string, string) {}, quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	var r sessionResult
	_ = adaptertest.Watchdog(t, "a session against a server that hangs up", func() error {
		r.up, r.err = cairnqlibpq.ListenSession(adaptertest.Ctx(t), dsn, dsn, l, func() { t.Error("subscribed") })
		return nil
	})
	if r.up || r.err == nil || errors.Is(r.err, executor.ErrListenUnavailable) {
		t.Fatalf("session = %v, %v; want a transient failure before subscribing", r.up, r.err)
	}
	// The session has waited for pq's goroutine to end: no dial can follow.
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections made, want 1: pq retried on its own", n)
	}
	requireNoListenerGoroutines(t)
}

// TestSessionEndsWithItsConnection: a terminated backend ends the session,
// which reports that it had subscribed, and pq's listener does not
// reconnect on its own: replacing the connection is pglisten's loop's.
func TestSessionEndsWithItsConnection(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	direct := pgtest.DSN(t)
	e := open(t, direct, nil)
	r, dsn := startRelay(t, direct)
	c := newCollector()
	done := startSession(t, ctx, dsn, direct, quietConfig(), []string{"relayed"}, c.onNotify)
	notify(t, ctx, e, "relayed", "1")
	if n := c.next(t); n != (adaptertest.Note{Channel: "relayed", Payload: "1"}) {
		t.Fatalf("got %v", n)
	}
	pid := awaitOneListener(t, ctx, e, 0)
	if row := adaptertest.QueryOne(t, ctx, e, "SELECT pg_terminate_backend($1::int4) AS ok", pid); row["ok"] != true {
		t.Fatalf("pg_terminate_backend(%d) = %v", pid, row["ok"])
	}
	res := awaitSession(t, done)
	if !res.up || res.err == nil {
		t.Fatalf("session = %v, %v; want up, ended by the lost connection", res.up, res.err)
	}
	if n := r.accepted.Load(); n != 1 {
		t.Errorf("%d connections made, want 1: pq reconnected on its own", n)
	}
	requireNoListenerGoroutines(t)
}

// TestSessionPingTimeout: an idle check on a connection that went
// half-open gets no answer, which ends the session even though the ping
// still waits on the network, holding pq's lock.
func TestSessionPingTimeout(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	direct := pgtest.DSN(t)
	r, dsn := startRelay(t, direct)
	cfg := quietConfig()
	cfg.IdleCheck, cfg.PingTimeout = 20*time.Millisecond, 300*time.Millisecond
	done := startSession(t, ctx, dsn, direct, cfg, []string{"frozen"}, func(string, string) {})
	r.frozen.Store(true)
	res := awaitSession(t, done)
	if !res.up || res.err == nil || !strings.Contains(res.err.Error(), "no answer to a ping") {
		t.Fatalf("session = %v, %v; want up, ended by the idle check", res.up, res.err)
	}
	requireNoListenerGoroutines(t)
}

// withApplicationName returns dsn with application_name set to name.
func withApplicationName(t *testing.T, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name
}

// TestListenIdleCheckKeepsTheConnection: the idle check of a healthy
// listener (a ping, which pg_stat_activity shows as an empty statement)
// keeps its connection: replacing it would open a window in which
// notifications are lost.
func TestListenIdleCheckKeepsTheConnection(t *testing.T) {
	ctx := adaptertest.Ctx(t)
	dsn := pgtest.DSN(t)
	reconnected := make(chan struct{}, 8)
	e := cairnqlibpq.New(appDB(t, dsn), withApplicationName(t, dsn, "cairnq_idle_check"), &cairnqlibpq.Options{
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	t.Cleanup(func() { _ = e.Close() })
	cairnqlibpq.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
	c := newCollector()
	stop, err := e.Listen(ctx, []string{"idle"}, c.onNotify)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	backends := func() []executor.Row {
		rows, err := e.Query(ctx, `SELECT pid::int8 AS pid, query FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'cairnq_idle_check'`)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	var pid int64
	adaptertest.Poll(t, "an idle check ping", func() bool {
		rows := backends()
		if len(rows) != 1 {
			return false
		}
		q, _, _ := executor.Text(rows[0]["query"])
		pid = rows[0]["pid"].(int64)
		return q == ""
	})
	notify(t, ctx, e, "idle", "still here")
	if n := c.next(t); n.Payload != "still here" {
		t.Fatalf("got %v", n)
	}
	if rows := backends(); len(rows) != 1 || rows[0]["pid"] != pid {
		t.Errorf("listener backends %v, want still %d", rows, pid)
	}
	select {
	case <-reconnected:
		t.Error("an idle check reconnected")
	default:
	}
	stop()
	requireNoListenerGoroutines(t)
}
