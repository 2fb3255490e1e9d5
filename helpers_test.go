package cairnq_test

// The helpers the root package's tests share: opening a client on a
// temporary database, running workers, waiting for a condition or a task,
// and reading or writing the database file through a connection of its own,
// as another process would.

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/faulttest"
	"github.com/ncruces/go-sqlite3"
)

// execSQL runs a script on the database file through a separate connection,
// as another process would.
func execSQL(t *testing.T, path, script string) {
	t.Helper()
	if err := execSQLErr(path, script); err != nil {
		t.Fatal(err)
	}
}

// execSQLErr is execSQL for goroutines other than the test's, which must
// not call t.Fatal.
func execSQLErr(path, script string) error {
	c, err := sqlite3.Open(path)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.BusyTimeout(5 * time.Second); err != nil {
		return err
	}
	return c.Exec(script)
}

// tableCount counts the tables of the database file whose names match the
// LIKE pattern, read through a separate connection.
func tableCount(t *testing.T, path, like string) int {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.BindText(1, like); err != nil {
		t.Fatal(err)
	}
	if !st.Step() {
		t.Fatal(st.Err())
	}
	return st.ColumnInt(0)
}

// openTemp opens a client on a fresh database file in t's temporary
// directory, with opts (nil for the defaults), closed when the test ends.
func openTemp(t testing.TB, opts *cairnq.Options) *cairnq.Client {
	t.Helper()
	var o *cairnq.SQLiteOptions
	if opts != nil {
		o = &cairnq.SQLiteOptions{Options: *opts}
	}
	c, err := cairnq.Open(context.Background(), filepath.Join(t.TempDir(), "tasks.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// countTasks counts c's tasks in every queue and status.
func countTasks(t *testing.T, c *cairnq.Client) int {
	t.Helper()
	stats, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range stats {
		n += s.Queued + s.Running + s.Succeeded + s.Failed + s.Canceled
	}
	return n
}

// The worker helpers are the fault suite's, which every package's tests
// share: startWorker also fails a test whose worker panics or hangs.
var (
	startWorker = faulttest.StartWorker
	waitTask    = faulttest.WaitTask
)

// newWorker returns a worker on c with options o (nil for the defaults),
// polling every 20ms unless o says otherwise.
func newWorker(t testing.TB, c *cairnq.Client, o *cairnq.WorkerOptions) *cairnq.Worker {
	t.Helper()
	if o == nil {
		o = &cairnq.WorkerOptions{}
	}
	return faulttest.NewWorker(t, c, o)
}

// waitFor polls cond until it holds, failing after 15s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// workerGoroutines returns the stacks of goroutines running worker code
// that are still there after up to two seconds. Run returns once its
// goroutines signalled Done, which each does from its last deferred call,
// so one may still be on its way out for a moment; a leaked one stays.
func workerGoroutines(w *cairnq.Worker) string { return workerGoroutinesBut(w, "") }

// workerGoroutinesBut is workerGoroutines leaving out the goroutines whose
// stack holds but (when not ""): a handler Run documents it leaves behind.
func workerGoroutinesBut(w *cairnq.Worker, but string) string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := workerStacks(w, but)
		if left == "" || time.Now().After(deadline) {
			return left
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// workerStacks returns the stacks of goroutines running w's code now,
// but those whose stack holds but (when not "").
func workerStacks(w *cairnq.Worker, but string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	self := fmt.Sprintf("(%p", w) // the receiver, as stack traces print it
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "cairnq-go.(*Worker)") && strings.Contains(g, self) &&
			(but == "" || !strings.Contains(g, but)) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// ledgerRow is one row of cairnq_migrations.
type ledgerRow struct {
	name string
	at   int64
}

// readLedger reads the migration ledger and the cairnq_meta rows of the
// database file through a separate connection.
func readLedger(t *testing.T, path string) ([]ledgerRow, map[string]string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rows []ledgerRow
	s, _, err := c.Prepare("SELECT name, applied_at_ms FROM cairnq_migrations ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for s.Step() {
		rows = append(rows, ledgerRow{s.ColumnText(0), s.ColumnInt64(1)})
	}
	s.Close()
	meta := map[string]string{}
	s, _, err = c.Prepare("SELECT key, value FROM cairnq_meta")
	if err != nil {
		t.Fatal(err)
	}
	for s.Step() {
		meta[s.ColumnText(0)] = s.ColumnText(1)
	}
	s.Close()
	return rows, meta
}
