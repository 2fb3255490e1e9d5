package cairnq_test

// A SQLite file deleted or replaced under a running process: the process
// must stop serving the file it still holds open (every call, Run and the
// scheduler end with ErrDatabaseReplaced, logged at ERROR) instead of
// running a queue that every newly opened process no longer sees.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// removeDB removes a database file and its WAL and shared-memory files, as
// an operator's `rm q.db q.db-wal q.db-shm` does.
func removeDB(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// openLogged opens the SQLite file at path with its log written to buf.
func openLogged(t *testing.T, path string, buf *syncbuf.Buffer) *cairnq.Client {
	t.Helper()
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDeletedFileFailsEveryCallSQLite removes the file under an open
// client: once a call notices, every call fails with ErrDatabaseReplaced,
// the loss is logged at ERROR once, and a client opened on the path
// afterwards gets a fresh database the old one never wrote to.
func TestDeletedFileFailsEveryCallSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	var buf syncbuf.Buffer
	c := openLogged(t, path, &buf)
	before, err := c.Submit(ctx, "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	removeDB(t, path)
	var first error
	waitFor(t, "a submit to fail once the file is gone", func() bool {
		_, first = c.Submit(ctx, "job", nil, nil)
		return first != nil
	})
	if !errors.Is(first, cairnq.ErrDatabaseReplaced) {
		t.Fatalf("submit after rm: %v, want ErrDatabaseReplaced", first)
	}
	if !strings.Contains(first.Error(), path) {
		t.Errorf("the error does not name the path: %v", first)
	}
	calls := map[string]func() error{
		"Submit": func() error { _, err := c.Submit(ctx, "job", nil, nil); return err },
		"Get":    func() error { _, err := c.Get(ctx, before.ID); return err },
		"Stats":  func() error { _, err := c.Stats(ctx, ""); return err },
		"List":   func() error { _, err := c.List(ctx, nil); return err },
		"Cancel": func() error { _, err := c.Cancel(ctx, before.ID); return err },
		"SubmitMany": func() error {
			_, err := c.SubmitMany(ctx, []cairnq.SubmitItem{{Name: "job"}, {Name: "job"}})
			return err
		},
		"Wait": func() error {
			_, err := c.Wait(ctx, before.ID, &cairnq.WaitOptions{Timeout: time.Minute})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, cairnq.ErrDatabaseReplaced) {
			t.Errorf("%s after the loss: %v, want ErrDatabaseReplaced", name, err)
		}
	}
	if n := strings.Count(buf.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want the loss logged once:\n%s", n, buf.String())
	}
	fresh := openTemp2(t, path)
	if n := countTasks(t, fresh); n != 0 {
		t.Errorf("the new file holds %d tasks, want none of the lost client's", n)
	}
}

// openTemp2 opens the SQLite file at path with the defaults.
func openTemp2(t *testing.T, path string) *cairnq.Client {
	t.Helper()
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDeletedFileReplacedStopsWorkerSQLite puts another database at the
// path under a running worker and scheduler (a backup restored by
// rename): both Runs end with ErrDatabaseReplaced, and the worker had
// claimed nothing of the new file.
func TestDeletedFileReplacedStopsWorkerSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	c := openTemp2(t, path)
	w := newWorker(t, c, nil)
	ran := make(chan string, 16)
	if err := w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ran <- tc.Task().ID
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	sched := cairnq.NewScheduler(c, nil)
	if _, err := sched.Add("@every 1h", "tick", nil, nil); err != nil {
		t.Fatal(err)
	}
	schedErr := make(chan error, 1)
	go func() { schedErr <- sched.Run(ctx) }()
	if _, err := c.Submit(ctx, "job", nil, nil); err != nil {
		t.Fatal(err)
	}
	<-ran

	// The backup: another database, holding a task, renamed over the path.
	backup := filepath.Join(dir, "backup.db")
	other := openTemp2(t, backup)
	waiting, err := other.Submit(ctx, "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	// A restore removes the old database's WAL and shared memory too:
	// SQLite would replay a stale WAL over the restored file.
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	for what, ch := range map[string]chan error{"worker": runErr, "scheduler": schedErr} {
		if err := <-ch; !errors.Is(err, cairnq.ErrDatabaseReplaced) {
			t.Errorf("%s Run ended with %v, want ErrDatabaseReplaced", what, err)
		}
	}
	restored := openTemp2(t, path)
	got, err := restored.Get(ctx, waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cairnq.StatusQueued {
		t.Errorf("the restored file's task is %s, want queued: the lost worker ran it", got.Status)
	}
}

// The deleted-file process test re-executes this test binary as a worker
// process; these variables tell the child what to do.
const (
	dfEnvDB    = "CAIRNQ_DF_DB"    // the database file
	dfEnvOut   = "CAIRNQ_DF_OUT"   // the child's output: a line per run, then how Run ended
	dfEnvClose = "CAIRNQ_DF_CLOSE" // if set, the child only holds the file open until this file exists, then closes
)

// dfPoll is the child worker's poll interval.
const dfPoll = 200 * time.Millisecond

// TestDeletedFileWorkerProcessSQLite runs a worker process, removes its
// database files under it, and checks that the process stops on its own
// with ErrDatabaseReplaced; a worker process started afterwards runs what
// the new file at the path holds.
func TestDeletedFileWorkerProcessSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	c := openTemp2(t, path)
	for range 20 {
		if _, err := c.Submit(ctx, "job", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	first := startDFChild(t, path, filepath.Join(dir, "first.out"))
	waitFor(t, "the first worker to run the first file's tasks", func() bool {
		return countLinesWith(first.out, "ran ") == 20
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	removeDB(t, path)
	removed := time.Now()
	if err := first.wait(t); err != nil {
		t.Fatalf("the first worker exited with %v:\n%s", err, first.log.String())
	}
	t.Logf("the first worker stopped %v after the rm (poll interval %v)", time.Since(removed).Round(time.Millisecond), dfPoll)
	if out := readFile(t, first.out); !strings.Contains(out, "run: replaced") {
		t.Fatalf("the first worker's Run did not end with ErrDatabaseReplaced:\n%s\n%s", out, first.log.String())
	}

	fresh := openTemp2(t, path)
	want := map[string]bool{}
	for range 5 {
		task, err := fresh.Submit(ctx, "job", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[task.ID] = true
	}
	second := startDFChild(t, path, filepath.Join(dir, "second.out"))
	for id := range want {
		if task := waitTask(t, fresh, id); task.Status != cairnq.StatusSucceeded {
			t.Errorf("task %s of the new file is %s", id, task.Status)
		}
	}
	if n := countLinesWith(second.out, "ran "); n != len(want) {
		t.Errorf("the restarted worker ran %d tasks, want %d", n, len(want))
	}
	second.stop(t)
}

// dfChild is one worker process of the deleted-file test.
type dfChild struct {
	cmd  *exec.Cmd
	out  string
	log  syncbuf.Buffer
	done chan error
}

func startDFChild(t *testing.T, path, out string, env ...string) *dfChild {
	t.Helper()
	c := &dfChild{out: out, done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestDeletedFileChild$", "-test.count=1", "-test.v", "-test.timeout=2m")
	c.cmd.Env = append(os.Environ(), dfEnvDB+"="+path, dfEnvOut+"="+out)
	c.cmd.Env = append(c.cmd.Env, env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// wait waits for the child to exit on its own, for at most a minute.
func (c *dfChild) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the worker process did not exit:\n%s", c.log.String())
		return nil
	}
}

// stop interrupts the child and waits for it.
func (c *dfChild) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(t); err != nil {
		t.Errorf("the worker exited with %v:\n%s", err, c.log.String())
	}
}

// TestDeletedFileChild is the worker process of
// TestDeletedFileWorkerProcessSQLite; in a normal run it returns at once.
// It runs "job" tasks until Run returns or it is interrupted, writing a
// line per run and one saying how Run ended.
func TestDeletedFileChild(t *testing.T) {
	path := os.Getenv(dfEnvDB)
	if path == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := os.OpenFile(os.Getenv(dfEnvOut), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if closeNow := os.Getenv(dfEnvClose); closeNow != "" {
		holdThenClose(t, c, out, closeNow)
		return
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: dfPoll})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		_, err := fmt.Fprintf(out, "ran %s\n", tc.Task().ID)
		return nil, err
	}, nil); err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctx)
	switch {
	case err == nil:
		fmt.Fprintln(out, "run: nil")
	case errors.Is(err, cairnq.ErrDatabaseReplaced):
		fmt.Fprintf(out, "run: replaced: %v\n", err)
	default:
		fmt.Fprintf(out, "run: other: %v\n", err)
	}
}

// countLinesWith counts the lines of the file at path starting with prefix.
func countLinesWith(path, prefix string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for line := range bytes.Lines(data) {
		if bytes.HasPrefix(line, []byte(prefix)) {
			n++
		}
	}
	return n
}

// TestDeletedFileCloseKeepsNewFilesSQLite removes the file under a
// process holding it open while this process serves the new file at the
// path; then the other process closes its client. SQLite's last
// connection to a database checkpoints and deletes its -wal and -shm by
// name, which are the new database's now; SQLite skips both for a file
// whose path names another (SQLITE_FCNTL_HAS_MOVED, which the driver's
// VFS answers), and this holds the store to it: were the new WAL deleted,
// what this process committed would vanish from every process opening
// the path.
func TestDeletedFileCloseKeepsNewFilesSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	closeNow := filepath.Join(dir, "close")
	holder := startDFChild(t, path, filepath.Join(dir, "holder.out"), dfEnvClose+"="+closeNow)
	waitFor(t, "the holder to open the file", func() bool { return countLinesWith(holder.out, "open") == 1 })
	removeDB(t, path)
	second := openTemp2(t, path)
	task, err := second.Submit(ctx, "job", nil, nil) // in the new WAL, not yet checkpointed
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(closeNow, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := holder.wait(t); err != nil {
		t.Fatalf("the holder exited with %v:\n%s", err, holder.log.String())
	}
	if out := readFile(t, holder.out); !strings.Contains(out, "closed") {
		t.Fatalf("the holder did not close its client:\n%s\n%s", out, holder.log.String())
	}
	third := openTemp2(t, path)
	if _, err := third.Get(ctx, task.ID); err != nil {
		t.Errorf("once the lost process closed, a new client cannot read what this one committed: %v", err)
	}
}

// holdThenClose is the holder's part in TestDeletedFileCloseKeepsNewFilesSQLite:
// it writes to the file, says so, and closes c once closeNow exists.
func holdThenClose(t *testing.T, c *cairnq.Client, out *os.File, closeNow string) {
	if _, err := c.Submit(context.Background(), "job", nil, nil); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(out, "open")
	for {
		if _, err := os.Stat(closeNow); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := c.Close()
	fmt.Fprintf(out, "closed: %v\n", err)
}

// TestDeletedFileBusyWorkerStopsSQLite removes the file under a worker
// whose every slot runs a handler waiting on its context: Run abandons
// the calls at once (their outcomes can no longer be recorded) and
// returns ErrDatabaseReplaced, rather than wait out ShutdownTimeout.
func TestDeletedFileBusyWorkerStopsSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	c := openTemp2(t, path)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2, ShutdownTimeout: time.Hour})
	started := make(chan struct{}, 2)
	if err := w.Handle("hold", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Submit(ctx, "hold", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	<-started
	<-started
	removeDB(t, path)
	select {
	case err := <-runErr:
		if !errors.Is(err, cairnq.ErrDatabaseReplaced) {
			t.Errorf("Run ended with %v, want ErrDatabaseReplaced", err)
		}
	case <-time.After(time.Minute): // a hang guard: ShutdownTimeout is an hour
		t.Fatal("Run did not return; it waits for ShutdownTimeout")
	}
}

// TestDeletedFileSymlinkRetargetedSQLite opens the database through a
// symlink, then points the symlink at another database: every process
// opening the path now reaches that one, so this store stops.
func TestDeletedFileSymlinkRetargetedSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	openTemp2(t, filepath.Join(dir, "a.db")).Close()
	link := filepath.Join(dir, "q.db")
	if err := os.Symlink("a.db", link); err != nil {
		t.Fatal(err)
	}
	c := openTemp2(t, link)
	if _, err := c.Submit(ctx, "job", nil, nil); err != nil {
		t.Fatal(err)
	}
	openTemp2(t, filepath.Join(dir, "b.db")).Close()
	tmp := filepath.Join(dir, "q.db.new")
	if err := os.Symlink("b.db", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil { // atomically, as a deploy switches it
		t.Fatal(err)
	}
	var err error
	waitFor(t, "a submit to fail once the link names another file", func() bool {
		_, err = c.Submit(ctx, "job", nil, nil)
		return err != nil
	})
	if !errors.Is(err, cairnq.ErrDatabaseReplaced) {
		t.Errorf("submit after the link moved: %v, want ErrDatabaseReplaced", err)
	}
}
