package adaptertest

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the admin connection

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// mixedChannel is the default Adapter.MixedChannel.
const mixedChannel = `Mixed "Case".ch`

// Listen checks that a listener gets exactly the notifications of its
// channels (case and punctuation kept, duplicates subscribed once), holds
// only the connections it should, and that stop is final and idempotent.
func (a Adapter) Listen(t *testing.T) {
	p := a.open(t, Options{})
	mixed := a.MixedChannel
	if mixed == "" {
		mixed = mixedChannel
	}
	got := make(chan Note, 16)
	var stopped atomic.Bool
	stop, err := p.Exec.Listen(Ctx(t), []string{"cairnq_a", mixed, "cairnq_a"}, func(c, pl string) {
		if stopped.Load() {
			t.Errorf("notification after stop: %s %q", c, pl)
		}
		got <- Note{c, pl}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if n := p.inUse(); n != a.ConnsHeld {
		t.Errorf("%d pooled connections in use while listening, want %d", n, a.ConnsHeld)
	}

	// Notifications on one listener arrive in commit order, so the absence
	// of the others before the last one is proof they were not delivered.
	// Listen returned once subscribed: nothing is lost.
	sent := []Note{
		{"cairnq_other", "ignored"},
		{"cairnq_a", `{"id":1,"q":"it's \"x\""}`},
		{"CAIRNQ_A", "case matters"},
		{mixed, "héllo\nworld"},
		{"cairnq_a", ""},
	}
	for _, n := range sent {
		Notify(t, p.App, n.Channel, n.Payload)
	}
	for _, want := range []Note{sent[1], sent[3], sent[4]} {
		if n := Recv(t, got); n != want {
			t.Fatalf("got %+v, want %+v", n, want)
		}
	}
	OneListener(t, p.App, 0)

	stop()
	stopped.Store(true)
	stop() // idempotent
	if n := p.inUse(); n != 0 {
		t.Errorf("%d connections in use after stop", n)
	}
	Poll(t, "the listener backend to end", func() bool { return len(ListenerPIDs(t, p.App)) == 0 })
	Notify(t, p.App, "cairnq_a", "after stop")
	select {
	case n := <-got:
		t.Fatalf("delivered after stop: %+v", n)
	default:
	}
}

// ListenReconnects terminates the listener's backend twice: each time
// OnReconnect must run, a new backend must listen and get what is sent
// next, the broken connection must not stay taken from the pool, and stop
// must leave no goroutine of the listener behind.
func (a Adapter) ListenReconnects(t *testing.T) {
	reconnected := make(chan struct{}, 16)
	p := a.open(t, Options{OnReconnect: func() { reconnected <- struct{}{} }})
	admin, err := sql.Open("pgx", pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	channel := "cairnq_wake_" + strings.NewReplacer("-", "_", " ", "_").Replace(a.Name)
	got := make(chan Note, 16)
	stop, err := p.Exec.Listen(Ctx(t), []string{channel}, func(c, pl string) { got <- Note{c, pl} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	Notify(t, p.App, channel, "before")
	if n := Recv(t, got); n.Payload != "before" {
		t.Fatalf("got %+v", n)
	}

	pid := OneListener(t, p.App, 0)
	for round := range 2 {
		var killed bool
		if err := admin.QueryRowContext(Ctx(t), `SELECT pg_terminate_backend($1)`, pid).Scan(&killed); err != nil || !killed {
			t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
		}
		select {
		case <-reconnected:
		case <-time.After(WaitTimeout):
			t.Fatalf("round %d: OnReconnect did not run", round)
		}
		pid = OneListener(t, p.App, pid)
		payload := fmt.Sprint("after ", round)
		Notify(t, p.App, channel, payload)
		if n := Recv(t, got); n != (Note{channel, payload}) {
			t.Fatalf("got %+v", n)
		}
	}
	if n := p.inUse(); n != a.ConnsHeld {
		t.Errorf("%d connections in use after reconnects, want %d: broken ones must be discarded", n, a.ConnsHeld)
	}
	stop()
	if n := ListenerGoroutines(t, channel); n != 0 {
		t.Errorf("%d listener goroutines outlive stop", n)
	}
	if n := p.inUse(); n != 0 {
		t.Errorf("%d connections in use after stop", n)
	}
}

// ListenIdleCheckKeepsTheConnection checks that an idle check of a healthy
// listener keeps its connection: replacing it would open a window in which
// notifications are lost.
func (a Adapter) ListenIdleCheckKeepsTheConnection(t *testing.T) {
	reconnected := make(chan struct{}, 16)
	p := a.open(t, Options{OnReconnect: func() { reconnected <- struct{}{} }, FastIdleCheck: true})
	got := make(chan Note, 16)
	stop, err := p.Exec.Listen(Ctx(t), []string{"idle"}, func(c, pl string) { got <- Note{c, pl} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	pid := OneListener(t, p.App, 0)
	if a.AwaitIdleCheck != nil {
		a.AwaitIdleCheck(t, p, pid)
	} else {
		AwaitPing(t, p.App, pid)
	}
	Notify(t, p.App, "idle", "still here")
	if n := Recv(t, got); n.Payload != "still here" {
		t.Fatalf("got %+v", n)
	}
	if pids := ListenerPIDs(t, p.App); !slices.Equal(pids, []int64{pid}) {
		t.Errorf("listener backends %v, want still %d", pids, pid)
	}
	select {
	case <-reconnected:
		t.Error("an idle check reconnected")
	default:
	}
}

// CloseStopsListeners checks that Close ends the executor's listeners, so
// none outlives the client, and leaves the application's pool working.
func (a Adapter) CloseStopsListeners(t *testing.T) {
	p := a.open(t, Options{})
	stop, err := p.Exec.Listen(Ctx(t), []string{"a"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exec.Close(); err != nil {
		t.Fatal(err)
	}
	stop() // after Close: a no-op
	if n := p.inUse(); n != 0 {
		t.Errorf("%d connections in use after Close", n)
	}
	Poll(t, "the listener backend to end", func() bool { return len(ListenerPIDs(t, p.App)) == 0 })
	if _, err := p.Exec.Listen(Ctx(t), []string{"a"}, func(string, string) {}); err == nil {
		t.Error("Listen after Close succeeded")
	}
	if err := p.App.PingContext(Ctx(t)); err != nil {
		t.Errorf("the application's pool after Close: %v", err)
	}
}

// ListenArguments checks that Listen refuses what the server would refuse
// later or what could never deliver (no channels, a bad name, no
// callback), up front and as an error rather than a panic, and that a
// closed executor refuses to start a listener nobody would stop.
func (a Adapter) ListenArguments(t *testing.T) {
	e := a.open(t, Options{}).Exec
	bad := append([][]string{nil, {""}, {strings.Repeat("x", 64)}}, a.BadChannels...)
	for _, chans := range bad {
		if _, err := e.Listen(Ctx(t), chans, func(string, string) {}); err == nil {
			t.Errorf("Listen(%q) succeeded", chans)
		}
	}
	if _, err := e.Listen(Ctx(t), []string{"a"}, nil); err == nil {
		t.Error("Listen with a nil onNotify succeeded")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Listen(Ctx(t), []string{"a"}, func(string, string) {}); err == nil {
		t.Error("Listen after Close succeeded")
	}
}

// ListenRefused checks that e, on the application's pool db, refuses
// LISTEN with ErrListenUnavailable, the error that makes the client fall
// back to polling for good, without keeping a connection taken, and that
// its statements still work there. what names the setup in messages.
func ListenRefused(t *testing.T, what string, e executor.Executor, db *sql.DB) {
	t.Helper()
	l, ok := e.(executor.Listener)
	if !ok {
		t.Fatalf("%s: %T does not implement executor.Listener", what, e)
	}
	if _, err := l.Listen(Ctx(t), []string{"a"}, func(string, string) {}); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("%s: %v, want ErrListenUnavailable", what, err)
	}
	if n := db.Stats().InUse; n != 0 {
		t.Errorf("%s: %d connections in use after the refusal, want any probed one back in the pool", what, n)
	}
	if n := Count(t, e, `SELECT count(*) AS n FROM pg_class WHERE relname = $1`, "pg_class"); n != 1 {
		t.Errorf("%s: count = %d", what, n)
	}
}
