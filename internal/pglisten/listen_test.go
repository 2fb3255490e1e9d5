package pglisten

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

var quiet = Config{LogPrefix: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

func TestListenValidatesChannels(t *testing.T) {
	nop := func(string, string) {}
	for _, tc := range []struct {
		name     string
		channels []string
		onNotify func(string, string)
		want     string
	}{
		{"nil onNotify", []string{"a"}, nil, "test: listen: nil onNotify"},
		{"no channels", nil, nop, "test: listen: no channels"},
		{"empty name", []string{"a", ""}, nop, "empty or longer"},
		{"too long", []string{strings.Repeat("x", 64)}, nop, "empty or longer"},
	} {
		var g Group
		_, err := g.Listen(context.Background(), tc.channels, tc.onNotify, quiet, func(*Listener) (Source, string, error) {
			t.Fatalf("%s: source asked for", tc.name)
			return nil, "", nil
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestNewListenerDedupsAndDefaults(t *testing.T) {
	l, err := NewListener([]string{"b", "a", "b", strings.Repeat("x", 63)}, func(string, string) {}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(l.Channels(), ","), "b,a,"+strings.Repeat("x", 63); got != want {
		t.Errorf("channels %q, want %q", got, want)
	}
	if l.IdleCheck != idleCheck || l.PingTimeout != pingTimeout || l.Logger == nil {
		t.Errorf("defaults not set: %v %v %v", l.IdleCheck, l.PingTimeout, l.Logger)
	}
	if l.BackoffMin != backoffMin || l.BackoffMax != backoffMax {
		t.Errorf("backoff defaults not set: %v %v", l.BackoffMin, l.BackoffMax)
	}
}

func TestNewListenerBackoff(t *testing.T) {
	for _, c := range []struct {
		min, max, wantMin, wantMax time.Duration
	}{
		{10 * time.Millisecond, 200 * time.Millisecond, 10 * time.Millisecond, 200 * time.Millisecond},
		{-time.Second, 0, backoffMin, backoffMax},
		{time.Minute, 0, time.Minute, time.Minute}, // the default max is below min
		{time.Second, time.Millisecond, time.Second, time.Second},
	} {
		cfg := quiet
		cfg.BackoffMin, cfg.BackoffMax = c.min, c.max
		l, err := NewListener([]string{"a"}, func(string, string) {}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if l.BackoffMin != c.wantMin || l.BackoffMax != c.wantMax {
			t.Errorf("BackoffMin, BackoffMax = %v, %v: got %v, %v, want %v, %v",
				c.min, c.max, l.BackoffMin, l.BackoffMax, c.wantMin, c.wantMax)
		}
	}
}

func TestDeliverOnlyWantedChannels(t *testing.T) {
	var got []string
	l, err := NewListener([]string{"a", "b"}, func(ch, p string) { got = append(got, ch+"="+p) }, quiet)
	if err != nil {
		t.Fatal(err)
	}
	l.Deliver("a", "1")
	l.Deliver("c", "2")
	l.Deliver("b", "3")
	if s := strings.Join(got, " "); s != "a=1 b=3" {
		t.Errorf("delivered %q", s)
	}
}

type stateErr string

func (e stateErr) Error() string    { return "server error " + string(e) }
func (e stateErr) SQLState() string { return string(e) }

func TestUnavailableAndSQLState(t *testing.T) {
	if s := SQLState(fmt.Errorf("wrapped: %w", stateErr("42P01"))); s != "42P01" {
		t.Errorf("SQLState %q", s)
	}
	if s := SQLState(errors.New("plain")); s != "" {
		t.Errorf("SQLState of a plain error %q", s)
	}
	if err := Unavailable(stateErr("0A000")); !errors.Is(err, executor.ErrListenUnavailable) || SQLState(err) != "0A000" {
		t.Errorf("Unavailable(0A000) = %v", err)
	}
	other := stateErr("57P01")
	if err := Unavailable(other); err != error(other) {
		t.Errorf("Unavailable(57P01) = %v, want it unchanged", err)
	}
	if Unavailable(nil) != nil {
		t.Error("Unavailable(nil) != nil")
	}
}

type session = func(ctx context.Context, subscribed func()) (bool, error)

// fakeSource runs scripted sessions: each call takes the next one, or
// subscribes and blocks until ctx ends once they run out.
type fakeSource struct {
	calls       atomic.Int32
	script      []session
	interrupted atomic.Bool
}

func (s *fakeSource) Session(ctx, connectCtx context.Context, l *Listener, subscribed func()) (bool, error) {
	i := int(s.calls.Add(1)) - 1
	if i < len(s.script) {
		return s.script[i](ctx, subscribed)
	}
	subscribed()
	<-ctx.Done()
	return true, ctx.Err()
}

func (s *fakeSource) Interrupt() { s.interrupted.Store(true) }

func listen(g *Group, cfg Config, src Source) (stop func(), err error) {
	return g.Listen(context.Background(), []string{"ch"}, func(string, string) {}, cfg,
		func(*Listener) (Source, string, error) { return src, "test", nil })
}

func TestListenSourceError(t *testing.T) {
	var g Group
	refused := fmt.Errorf("%w: no", executor.ErrListenUnavailable)
	_, err := g.Listen(context.Background(), []string{"ch"}, func(string, string) {}, quiet,
		func(*Listener) (Source, string, error) { return nil, "", refused })
	if !errors.Is(err, executor.ErrListenUnavailable) || !strings.HasPrefix(err.Error(), "test: listen: ") {
		t.Fatalf("Listen: %v", err)
	}
}

func TestListenGivesUpOnPermanentError(t *testing.T) {
	refused := fmt.Errorf("%w: no", executor.ErrListenUnavailable)
	src := &fakeSource{script: []session{
		func(context.Context, func()) (bool, error) { return false, refused },
	}}
	var g Group
	if _, err := listen(&g, quiet, src); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Fatalf("Listen: %v", err)
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestListenRetriesTransientErrors(t *testing.T) {
	fail := func(context.Context, func()) (bool, error) { return false, errors.New("stale") }
	src := &fakeSource{script: []session{fail, fail, fail, fail}}
	var g Group
	if _, err := listen(&g, quiet, src); err == nil || err.Error() != "test: listen: stale" {
		t.Fatalf("Listen: %v", err)
	}
	if n := src.calls.Load(); n != initialAttempts {
		t.Errorf("%d attempts, want %d", n, initialAttempts)
	}
}

func TestReconnectAndClose(t *testing.T) {
	dropped := func(ctx context.Context, subscribed func()) (bool, error) {
		subscribed()
		return true, errors.New("connection lost")
	}
	src := &fakeSource{script: []session{dropped}}
	reconnected := make(chan struct{}, 1)
	cfg := quiet
	cfg.OnReconnect = func() { reconnected <- struct{}{} }
	var g Group
	stop, err := listen(&g, cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-time.After(5 * time.Second):
		t.Fatal("OnReconnect did not run")
	}
	g.Close()
	if !src.interrupted.Load() {
		t.Error("Close did not interrupt the source")
	}
	stop() // idempotent
	g.Close()
	if _, err := listen(&g, quiet, &fakeSource{}); err == nil || !errors.Is(err, executor.ErrListenUnavailable) || !strings.HasPrefix(err.Error(), "test: listen: ") {
		t.Errorf("Listen on a closed group: %v", err)
	}
}

// TestReconnectWaitsTheConfiguredBackoff: the loop waits Config's backoff,
// not a default, before replacing a dropped connection, and stop ends that
// wait.
func TestReconnectWaitsTheConfiguredBackoff(t *testing.T) {
	dropped := func(ctx context.Context, subscribed func()) (bool, error) {
		subscribed()
		return true, errors.New("connection lost")
	}
	src := &fakeSource{script: []session{dropped}}
	cfg := quiet
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	var g Group
	stop, err := listen(&g, cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	// The default backoff would have made the next attempt by now.
	time.Sleep(4 * backoffMin)
	stop()
	if n := src.calls.Load(); n != 1 {
		t.Errorf("%d sessions, want 1: the loop did not wait BackoffMin", n)
	}
}

func TestAddToClosedGroupStops(t *testing.T) {
	l, err := NewListener([]string{"ch"}, func(string, string) {}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	l.src = &fakeSource{}
	if err := l.start(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	var g Group
	g.Close()
	if g.add(l) {
		t.Fatal("add to a closed group succeeded")
	}
	select {
	case <-l.done:
	default:
		t.Error("add to a closed group did not stop the listener")
	}
}

func TestStopLeavesGroup(t *testing.T) {
	var g Group
	stop, err := listen(&g, quiet, &fakeSource{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	g.mu.Lock()
	n := len(g.ls)
	g.mu.Unlock()
	if n != 0 {
		t.Errorf("%d listeners left in the group after stop", n)
	}
}
