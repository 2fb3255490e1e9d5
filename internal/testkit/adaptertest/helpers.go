package adaptertest

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// WaitTimeout bounds every wait for something asynchronous (a
// notification, a reconnect, a task's result). It is generous because a
// loaded CI machine running the race detector is slow, and a wait that
// succeeds returns as soon as it can.
const WaitTimeout = 30 * time.Second

// Ctx is a context for one test's statements, canceled when the test ends,
// so a hung server fails the test instead of the whole binary's timeout.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// OpenClient opens a cairnq client on ex, closed at cleanup. It opens with
// a background context because the client outlives the statements of any
// one step of the test.
func OpenClient(t testing.TB, ex executor.Executor) *cairnq.Client {
	t.Helper()
	c, err := cairnq.OpenPostgres(context.Background(), ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RunWorker runs w until the test ends (its context is canceled before
// the cleanups run), then fails the test if Run returned an error, so a
// worker that dies early does not go unnoticed.
func RunWorker(t testing.TB, w *cairnq.Worker) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(t.Context()) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

// Query runs a statement that must succeed and returns its rows.
func Query(t testing.TB, s executor.Session, query string, args ...any) []executor.Row {
	t.Helper()
	rows, err := s.Query(Ctx(t), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return rows
}

// QueryOne runs a statement on s within ctx that must succeed with exactly
// one row, and returns that row.
func QueryOne(t testing.TB, ctx context.Context, s executor.Session, query string, args ...any) executor.Row {
	t.Helper()
	rows, err := s.Query(ctx, query, args...)
	if err != nil {
		t.Fatalf("Query(%q): %v", query, err)
	}
	if len(rows) != 1 {
		t.Fatalf("Query(%q): %d rows, want 1", query, len(rows))
	}
	return rows[0]
}

// Count runs a query returning one row whose column n is a bigint, as the
// count(*) checks all do, and fails the test on any other shape.
func Count(t testing.TB, s executor.Session, query string, args ...any) int64 {
	t.Helper()
	rows := Query(t, s, query, args...)
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows", query, len(rows))
	}
	n, ok := rows[0]["n"].(int64)
	if !ok {
		t.Fatalf("%s: n = %#v, want int64", query, rows[0]["n"])
	}
	return n
}

// Poll waits for cond, failing the test after WaitTimeout: what the server
// shows in pg_stat_activity lags what a client did, so tests poll it
// rather than sleep.
func Poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Note is one notification as a Listen callback received it, comparable
// so a test can check both channel and payload at once.
type Note struct{ Channel, Payload string }

// Recv returns the next notification on ch, failing the test after
// WaitTimeout.
func Recv(t testing.TB, ch <-chan Note) Note {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(WaitTimeout):
		t.Fatal("no notification")
		return Note{}
	}
}

// ListenerGoroutines counts the goroutines carrying a listener's profile
// label for channel (the listener and whatever its driver started from
// it). Tests running in parallel in one binary must use channels of their
// own for the count to be theirs.
func ListenerGoroutines(t testing.TB, channel string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec := range strings.SplitSeq(buf.String(), "\n\n") {
		if strings.Contains(rec, `"cairnq.channels":"`+channel+`"`) {
			var k int
			if _, err := fmt.Sscanf(rec, "%d @", &k); err == nil {
				n += k
			}
		}
	}
	return n
}
