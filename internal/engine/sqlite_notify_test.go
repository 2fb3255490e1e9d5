package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/fsnotify/fsnotify"
)

// The cross-process tests re-execute this test binary as the other
// process; these variables tell the child what to do.
const (
	notifyEnvRole = "CAIRNQ_NOTIFY_CHILD" // "submit" or "complete"; unset in a normal run
	notifyEnvDB   = "CAIRNQ_NOTIFY_DB"
	notifyEnvID   = "CAIRNQ_NOTIFY_ID" // the task "complete" claims and completes
)

// notifyDeadline bounds how long a test waits for a wakeup. Every test
// leaves polling out (the subscribers here have no poll at all), so only
// the watch can explain a wakeup; the deadline only keeps a broken watch
// from hanging the run.
const notifyDeadline = 20 * time.Second

// TestSQLiteNotifyChild is the other process of the tests below.
func TestSQLiteNotifyChild(t *testing.T) {
	role := os.Getenv(notifyEnvRole)
	if role == "" {
		return // not a child: the cross-process tests start this
	}
	ctx := context.Background()
	s, err := OpenSQLite(ctx, os.Getenv(notifyEnvDB), SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	switch role {
	case "submit":
		if _, err := s.Submit(ctx, SubmitParams{Name: "notify.job", SubmitOptions: cairnqtype.SubmitOptions{Queue: "q1"}}); err != nil {
			t.Fatal(err)
		}
	case "complete":
		ts, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"q1"}, WorkerID: "child", Lease: time.Minute})
		if err != nil || len(ts) != 1 || ts[0].ID != os.Getenv(notifyEnvID) {
			t.Fatalf("claim: %v %v", ts, err)
		}
		if _, err := s.Complete(ctx, ts[0].ID, "child", map[string]any{"ok": true}); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
}

// runNotifyChild runs the child in role on the database at path and
// returns once it has exited successfully.
func runNotifyChild(t *testing.T, path, role string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteNotifyChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), notifyEnvRole+"="+role, notifyEnvDB+"="+path)
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child %s: %v\n%s", role, err, out)
	}
}

func openNotifyTemp(t *testing.T) (*Store, string) {
	t.Helper()
	t.Setenv(envSQLiteNotify, "")
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := OpenSQLite(context.Background(), path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.be.(*sqliteBackend).wal == nil {
		t.Fatal("no watch on a file database")
	}
	return s, path
}

// waitFor polls cond until it holds or the deadline passes.
func notifyWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(notifyDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func awaitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(notifyDeadline):
		t.Fatalf("no wakeup for %s", what)
	}
}

// A submit by another process wakes this process's subscriber on the
// queue, and a completion by another process its waiter on the task,
// though neither polls.
func TestSQLiteNotifyCrossProcess(t *testing.T) {
	if os.Getenv(notifyEnvRole) != "" {
		t.Skip("child")
	}
	s, path := openNotifyTemp(t)
	ctx := context.Background()

	wake, unsubscribe := s.SubscribeQueued(ctx, []string{"q1"})
	defer unsubscribe()
	if !s.queuedListen.Listening() {
		t.Fatal("the watch did not start with the first subscriber")
	}
	runNotifyChild(t, path, "submit")
	awaitWake(t, wake, "another process's submit")
	ts, err := s.List(ctx, cairnqtype.ListOptions{Queue: "q1"})
	if err != nil || len(ts) != 1 {
		t.Fatalf("list: %v %v", ts, err)
	}

	done, unsubDone := s.SubscribeDone(ctx, ts[0].ID)
	defer unsubDone()
	runNotifyChild(t, path, "complete", notifyEnvID+"="+ts[0].ID)
	awaitWake(t, done, "another process's completion")
	got, err := s.Get(ctx, ts[0].ID)
	if err != nil || got.Status != cairnqtype.StatusSucceeded {
		t.Fatalf("get: %+v %v", got, err)
	}
}

// Commits of this process wake nobody through the watch (the hub already
// announced them); every commit of another one does. A second Store on the
// same file stands for the other process: its writer is not this one's.
func TestSQLiteNotifyOwnCommitsWakeNobody(t *testing.T) {
	s, path := openNotifyTemp(t)
	ctx := context.Background()
	other, err := OpenSQLite(ctx, path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, unsubscribe := s.Subscribe(ctx)
	defer unsubscribe()
	n := s.be.(*sqliteBackend).wal
	for round := 1; round <= 3; round++ {
		for range 30 {
			if _, err := s.Submit(ctx, SubmitParams{Name: "own"}); err != nil {
				t.Fatal(err)
			}
		}
		// An empty commit (nothing to claim) writes no frames.
		if _, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"nothing"}, WorkerID: "w", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Submit(ctx, SubmitParams{Name: "foreign"}); err != nil {
			t.Fatal(err)
		}
		notifyWaitFor(t, "the foreign commit's wakeup", func() bool { return n.wakeups.Load() >= int64(round) })
	}
	unsubscribe()
	s.Close() // stops the watch: every wakeup it delivered is counted
	if got := n.wakeups.Load(); got != 3 {
		t.Fatalf("%d wakeups for 3 foreign commits among 90 own ones", got)
	}
}

// The watch goroutine ends at Close, and after the linger once nobody
// subscribes; a new subscriber starts it again.
func TestSQLiteNotifyStops(t *testing.T) {
	s, _ := openNotifyTemp(t)
	ctx := context.Background()
	n := s.be.(*sqliteBackend).wal
	s.queuedListen.SetLinger(10 * time.Millisecond)
	if n.running.Load() != 0 {
		t.Fatal("the watch runs with no subscriber")
	}
	_, unsubscribe := s.SubscribeQueued(ctx, []string{"q"})
	if n.running.Load() != 1 {
		t.Fatalf("%d watch goroutines with one subscriber", n.running.Load())
	}
	_, unsub2 := s.SubscribeDone(ctx, "task_x")
	if n.running.Load() != 1 {
		t.Fatalf("%d watch goroutines with two subscribers: want one per store", n.running.Load())
	}
	unsubscribe()
	unsub2()
	// The stop ends the goroutine, then closes the WAL index.
	notifyWaitFor(t, "the watch to stop after the linger", func() bool { return n.running.Load() == 0 && n.shm.Load() == nil })
	_, unsubscribe = s.SubscribeQueued(ctx, []string{"q"})
	defer unsubscribe()
	if n.running.Load() != 1 {
		t.Fatal("the watch did not start again")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n.running.Load() != 0 {
		t.Fatal("the watch survives Close")
	}
}

// Where the filesystem cannot notify, subscribers fall back to their poll
// and the store says so once.
func TestSQLiteNotifyUnavailable(t *testing.T) {
	s, _ := openNotifyTemp(t)
	n := s.be.(*sqliteBackend).wal
	n.newWatch = func() (*fsnotify.Watcher, error) { return nil, errors.New("too many open files") }
	ctx := context.Background()
	for range 2 {
		_, unsubscribe := s.SubscribeQueued(ctx, []string{"q"})
		unsubscribe()
	}
	if s.queuedListen.Listening() || n.running.Load() != 0 {
		t.Fatal("a watch runs though the filesystem refused it")
	}
}

// No watch for an in-memory database, nor with CAIRNQ_SQLITE_NOTIFY=0.
func TestSQLiteNotifyOff(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, ":memory:", SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.queuedListen != nil {
		t.Fatal("a watch on an in-memory database")
	}
	t.Setenv(envSQLiteNotify, "0")
	f, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "t.db"), SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.queuedListen != nil {
		t.Fatal("a watch with CAIRNQ_SQLITE_NOTIFY=0")
	}
}

func TestOwnChanges(t *testing.T) {
	n := &walNotifier{own: map[uint32]struct{}{}}
	n.own[5], n.own[6] = struct{}{}, struct{}{}
	if !n.ownChanges(4, 6) {
		t.Fatal("5 and 6 are own")
	}
	if len(n.own) != 0 {
		t.Fatal("past own counters kept")
	}
	n.own[8] = struct{}{}
	if n.ownChanges(6, 8) {
		t.Fatal("7 is foreign")
	}
	n.own[0] = struct{}{}
	if !n.ownChanges(^uint32(0), 0) {
		t.Fatal("wrap-around")
	}
	if n.ownChanges(3, 3+walOwnMax+1) {
		t.Fatal("a gap beyond walOwnMax is not own")
	}
}
