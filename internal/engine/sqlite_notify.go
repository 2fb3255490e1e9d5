package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/ncruces/go-sqlite3"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// Cross-process wakeups on SQLite.
//
// A commit by another process on the same file reaches this process
// through the filesystem: in WAL mode every commit that changes anything
// appends frames to the -wal file, so the kernel reports a write to it
// (inotify, kqueue, ReadDirectoryChangesW through fsnotify). Nothing is
// reported when nothing writes, so an idle worker blocks on the watch at no
// cost. The -shm file is no use for this: SQLite maps it into memory and
// writes it through the mapping, which raises no event; the main database
// file is written by checkpoints, not commits.
//
// A write event says that a commit is under way, not that it is visible:
// the writer appends its frames first and publishes them afterwards, in
// the wal-index header in -shm (after an fsync under synchronous=FULL). So
// on an event the watcher reads the header's change counter (iChange,
// which SQLite increments once per committed transaction) and, while a
// writer still holds the WAL write lock, reads it again with a short
// backoff until the lock is released: a commit announced by an event is
// always seen published before the watcher goes back to sleep.
//
// The watcher wakes every subscriber of the process (idle workers of every
// queue, every waiter, every Watch): it knows that something committed,
// not what. This process's own commits raise events too; the writer
// records the counter values its own commits produced, and a change made
// only of those wakes nobody (the in-process hub already announced them
// precisely). A change it cannot attribute wakes everyone: a spurious
// wakeup costs one re-read, a missed one costs a poll interval.
//
// One watcher runs per store, and only while something in the process
// subscribes (and walLinger after the last one left), through the same
// wake.Demand that runs LISTEN on Postgres. Where the filesystem cannot
// watch (no inotify instances left, an unsupported platform, a database
// not in WAL mode) the store says so once, at info level, and waits by
// polling as before.

// envSQLiteNotify disables the watcher when set to "0": a diagnostic, and
// the baseline of the cross-process benchmark. It is read when a store
// opens.
const envSQLiteNotify = "CAIRNQ_SQLITE_NOTIFY"

// channelWAL names the watch in the listener's log lines.
const channelWAL = "sqlite_wal"

const (
	// walLinger is how long the watch runs on after its last subscriber
	// left. Starting it again costs a few system calls, not a connection
	// as LISTEN does, and while it runs it wakes for this process's own
	// commits too: a worker busy claiming subscribes to nothing, and the
	// watch should not outlast its last idle poll by much.
	walLinger = 100 * time.Millisecond
	// walFireGap spaces wakeups during a burst of foreign commits (at most
	// 5,000 a second): the first one wakes at once, the ones within the
	// gap after it wake once, at its end.
	walFireGap = 200 * time.Microsecond
	// walRecheckFirst and walRecheckMax bound the backoff of the re-reads
	// while a writer holds the WAL write lock.
	walRecheckFirst = 50 * time.Microsecond
	walRecheckMax   = 2 * time.Millisecond
	// walOwnMax caps how many of this process's commits the watcher may
	// lag behind; beyond it the oldest are forgotten, which costs at most
	// a spurious wakeup.
	walOwnMax = 4096
)

// The wal-index header at the start of -shm (https://sqlite.org/walformat.html):
// iChange is a 32-bit counter, in native byte order, at byte 8, incremented
// by every commit. The WAL write lock is byte 120 of the same file.
const (
	shmChangeOffset = 8
	shmWriteLock    = 120
)

// walNotifier watches one SQLite database for commits by other processes.
// It is the executor.Listener behind the store's wake.Demand: Listen
// starts the watch, the returned stop ends it.
type walNotifier struct {
	walPath, shmPath string
	log              *slog.Logger

	// own records the change counters this process's commits produced.
	// The writer holds ownMu across COMMIT, so the watcher, which takes it
	// before deciding, never judges a counter the writer is still
	// producing.
	ownMu    sync.Mutex
	own      map[uint32]struct{}
	shm      atomic.Pointer[os.File] // -shm, open while watching; the writer reads the counter through it
	running  atomic.Int32            // watch goroutines alive, for tests
	wakeups  atomic.Int64            // wakeups delivered, for tests and diagnostics
	unknownW atomic.Bool             // a watch error was logged already
	newWatch func() (*fsnotify.Watcher, error)
}

// startSQLiteNotify sets up the cross-process watch of the file database
// b serves, delivering to h, and returns the demand listener the store's
// subscribers acquire, or nil when there is nothing to watch (an in-memory
// database, or CAIRNQ_SQLITE_NOTIFY=0).
func (b *sqliteBackend) startSQLiteNotify(h *wake.Hub) *wake.Demand {
	if b.memory || os.Getenv(envSQLiteNotify) == "0" {
		return nil
	}
	path := b.path
	if p, err := sqliteFilePath(b.w); err == nil && p != "" {
		path = p // the file a file: URI names
	}
	n := &walNotifier{
		walPath:  path + "-wal",
		shmPath:  path + "-shm",
		log:      b.log,
		own:      map[uint32]struct{}{},
		newWatch: fsnotify.NewWatcher,
	}
	b.wal = n
	b.notify = wake.NewDemand(n, channelWAL, func(string) { h.All() }, b.log, nil)
	b.notify.SetLinger(walLinger)
	return b.notify
}

// sqliteFilePath asks the connection which file its main database is.
func sqliteFilePath(c *sqliteConn) (string, error) {
	rows, err := c.query("SELECT file FROM pragma_database_list WHERE name = 'main'", nil)
	if err != nil || len(rows) == 0 {
		return "", err
	}
	s, _, err := asString("file", rows[0]["file"])
	return s, err
}

// Listen starts watching. It returns once the watch is in effect, so a
// commit that follows is always announced; the error wraps
// executor.ErrListenUnavailable when this database cannot be watched.
func (n *walNotifier) Listen(_ context.Context, _ []string, onNotify func(channel, payload string)) (func(), error) {
	shm, err := os.Open(n.shmPath)
	if err != nil {
		return nil, fmt.Errorf("%w: no WAL index to read (%v); is the database in WAL mode?", executor.ErrListenUnavailable, err)
	}
	last, err := readWALChange(shm)
	if err != nil {
		shm.Close()
		return nil, fmt.Errorf("%w: reading the WAL index: %v", executor.ErrListenUnavailable, err)
	}
	w, err := n.newWatch()
	if err != nil {
		shm.Close()
		return nil, fmt.Errorf("%w: the filesystem cannot notify: %v", executor.ErrListenUnavailable, err)
	}
	// The -wal file exists while this process has the database open in WAL
	// mode; watching the directory instead, filtered by name, covers a
	// file that is not there yet.
	if err := w.Add(n.walPath); err != nil {
		if err = w.Add(filepath.Dir(n.walPath)); err != nil {
			w.Close()
			shm.Close()
			return nil, fmt.Errorf("%w: the filesystem cannot notify: %v", executor.ErrListenUnavailable, err)
		}
	}
	n.ownMu.Lock()
	clear(n.own)
	n.ownMu.Unlock()
	n.shm.Store(shm)
	quit, done := make(chan struct{}), make(chan struct{})
	n.running.Add(1)
	go func() {
		defer close(done)
		defer n.running.Add(-1)
		n.run(w, shm, last, quit, func() {
			n.wakeups.Add(1)
			onNotify(channelWAL, "")
		})
	}()
	return sync.OnceFunc(func() {
		close(quit)
		w.Close()
		<-done
		n.shm.Store(nil)
		shm.Close()
	}), nil
}

// run is the watch goroutine: it waits for writes to -wal and wakes the
// process when they published a commit that is not this process's own.
func (n *walNotifier) run(w *fsnotify.Watcher, shm *os.File, last uint32, quit <-chan struct{}, fire func()) {
	var (
		timer     = time.NewTimer(time.Hour)
		checking  bool          // an event is not yet known to be published
		backoff   time.Duration // the next re-read's delay while a writer holds the lock
		attempt   int           // re-reads since the event, where the lock cannot be tested
		lastFire  time.Time
		firePend  bool // a wakeup waits for the end of walFireGap
		timerDue  bool
		walName   = filepath.Base(n.walPath)
		readFails int
	)
	timer.Stop()
	defer timer.Stop()
	arm := func(d time.Duration) {
		timer.Reset(d)
		timerDue = true
	}
	for {
		select {
		case <-quit:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if filepath.Base(ev.Name) != walName || !ev.Has(fsnotify.Write|fsnotify.Create) {
				continue
			}
			checking, backoff, attempt = true, 0, 0
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflowed event queue lost events: anything may have
			// changed.
			if n.unknownW.CompareAndSwap(false, true) {
				n.log.Info("cairnq: SQLite change notification error; waking waiters to re-read", "err", err)
			}
			checking, backoff, attempt, firePend = true, 0, 0, true
		case <-timer.C:
			timerDue = false
		}
		if timerDue { // an event arrived before the timer: the check below re-arms it
			timer.Stop()
			timerDue = false
		}
		if checking {
			busy, known := walWriteLocked(shm)
			cur, err := readWALChange(shm)
			switch {
			case err != nil:
				readFails++
				if readFails == 1 {
					n.log.Info("cairnq: reading the SQLite WAL index; waking waiters to re-read", "err", err)
				}
				firePend = true
			case cur != last:
				if !n.ownChanges(last, cur) {
					firePend = true
				}
				last = cur
			}
			if !known { // no lock test here: re-read a few times with backoff
				attempt++
				busy = attempt < 6
			}
			if !busy {
				checking = false
			} else {
				backoff = min(max(backoff*2, walRecheckFirst), walRecheckMax)
			}
		}
		if firePend {
			if wait := walFireGap - time.Since(lastFire); wait > 0 {
				arm(wait)
				continue
			}
			firePend = false
			lastFire = time.Now()
			fire()
		}
		if checking {
			arm(backoff)
		}
	}
}

// ownChanges reports whether every commit that moved the change counter
// from last to cur was this process's own, and forgets those.
func (n *walNotifier) ownChanges(last, cur uint32) bool {
	n.ownMu.Lock()
	defer n.ownMu.Unlock()
	d := cur - last // wraps correctly
	mine := d <= walOwnMax
	for v := last + 1; mine && v != cur+1; v++ {
		_, mine = n.own[v]
	}
	for v := range n.own { // the ones at or before cur are past
		if cur-v < 1<<31 {
			delete(n.own, v)
		}
	}
	return mine
}

// commit runs COMMIT on the writer's connection and, while the watch runs,
// records the change counter the commit produced, so that the watch does
// not wake this process for its own write. It is called with the write
// lock held (inside BEGIN IMMEDIATE), where the counter cannot move under
// it.
func (b *sqliteBackend) commit(c *sqliteConn) error {
	n := b.wal
	if n == nil || n.shm.Load() == nil {
		return c.exec("COMMIT")
	}
	n.ownMu.Lock()
	defer n.ownMu.Unlock()
	shm := n.shm.Load()
	if shm == nil {
		return c.exec("COMMIT")
	}
	before, rerr := readWALChange(shm)
	w0, _, serr := c.c.Status(sqlite3.DBSTATUS_CACHE_WRITE, false)
	if err := c.exec("COMMIT"); err != nil {
		return err
	}
	// Only a commit that wrote pages appends frames and moves the counter;
	// an empty one does neither, and recording it would hide the next
	// foreign commit.
	w1, _, serr2 := c.c.Status(sqlite3.DBSTATUS_CACHE_WRITE, false)
	if rerr == nil && serr == nil && serr2 == nil && w1 > w0 && len(n.own) < walOwnMax {
		n.own[before+1] = struct{}{}
	}
	return nil
}

// readWALChange reads the change counter of the wal-index header.
func readWALChange(shm *os.File) (uint32, error) {
	var buf [4]byte
	if _, err := shm.ReadAt(buf[:], shmChangeOffset); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint32(buf[:]), nil
}
