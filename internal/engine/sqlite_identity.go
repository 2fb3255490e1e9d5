package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A SQLite store serves the file it opened, but other processes reach the
// database by its path. When the two part (an operator's rm, a backup
// restored over the path by rename, a volume remounted under the
// process), this process's connections go on reading and writing the old
// file, now unlinked or hidden, while every process that opens the path
// gets the new one: the queue splits in two without a word. So the store
// compares what the path names with the file it opened, when a call
// starts and before a commit, at most every fileCheckEvery: a stat costs
// a few microseconds, a commit of one task a few hundred, and what the
// old file held is gone with it whenever the loss is seen. Once they
// differ the store is lost for good: every call fails with
// ErrDatabaseReplaced, logged once at ERROR, and a Worker's Run ends with
// it, so a supervisor restarts the process onto the file now at the path.
//
// A file overwritten in place (cp over it) keeps its identity and is not
// noticed here; SQLite then reads whatever the copy wrote, as any program
// would.

// fileCheckEvery spaces the checks (a worker polls, so one idle stops
// within its poll interval anyway).
const fileCheckEvery = 5 * time.Millisecond

// fileGuard holds the identity of the database file a store opened and
// whether its paths still name it.
type fileGuard struct {
	// paths are the file's path as SQLite resolved it and, when it
	// differs, the path the store was given, made absolute: a symlink
	// retargeted to another file parts that one from the file.
	paths []string
	id    os.FileInfo // what os.Stat said of the file when the store opened
	log   *slog.Logger

	lastCheck atomic.Int64 // unix nanoseconds of the last stat
	lostErr   atomic.Pointer[error]
	lostOnce  sync.Once
	lost      chan struct{} // closed once the path names another file, or none
}

// newFileGuard records what resolved (SQLite's path of the file) names
// now, and checks that given (the path the store was given, "" for a
// URI) names the same file. It returns nil for a path it cannot stat:
// the guard is a safeguard, never a reason to refuse a store that opened.
func newFileGuard(resolved, given string, log *slog.Logger) *fileGuard {
	fi, err := os.Stat(resolved)
	if err != nil {
		log.Warn("cairnq: cannot watch the SQLite file for deletion or replacement", "path", resolved, "err", err)
		return nil
	}
	paths := []string{resolved}
	if abs, err := filepath.Abs(given); given != "" && err == nil && abs != resolved {
		if gi, err := os.Stat(abs); err == nil && os.SameFile(fi, gi) {
			paths = append(paths, abs)
		}
	}
	g := &fileGuard{paths: paths, id: fi, log: log, lost: make(chan struct{})}
	g.lastCheck.Store(time.Now().UnixNano())
	return g
}

// newFileGuard is the guard of the file b's writer connection w opened.
func (b *sqliteBackend) newFileGuard(w *sqliteConn) *fileGuard {
	resolved, err := sqliteFilePath(w)
	if err != nil || resolved == "" {
		return nil
	}
	given := b.path
	if strings.HasPrefix(given, "file:") {
		given = "" // SQLite resolved the URI: resolved is its file
	}
	return newFileGuard(resolved, given, b.log)
}

// Lost returns a channel closed once the store's file was found deleted
// or replaced; nil for a guard that watches nothing, whose receive blocks
// forever.
func (g *fileGuard) Lost() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.lost
}

// err returns the store's ErrDatabaseReplaced once it is lost, else nil.
// It reads a flag, not the file system.
func (g *fileGuard) err() error {
	if g == nil {
		return nil
	}
	if p := g.lostErr.Load(); p != nil {
		return *p
	}
	return nil
}

// checkSoon is check for a call that starts: it stats at most every
// fileCheckEvery.
func (g *fileGuard) checkSoon() error {
	if g == nil {
		return nil
	}
	if err := g.err(); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	last := g.lastCheck.Load()
	if now-last < int64(fileCheckEvery) || !g.lastCheck.CompareAndSwap(last, now) {
		return nil
	}
	return g.check()
}

// check stats the paths and returns ErrDatabaseReplaced, wrapped with what
// was found, when it no longer names the file the store opened. Any
// error other than the path's absence (a permission changed, an
// interrupted call) proves nothing and is let pass.
func (g *fileGuard) check() error {
	if g == nil {
		return nil
	}
	if err := g.err(); err != nil {
		return err
	}
	for _, path := range g.paths {
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return g.markLost(path, "no file is there any more")
		case err == nil && !os.SameFile(g.id, fi):
			return g.markLost(path, "another file is there now")
		}
	}
	return nil
}

// markLost records the loss once, logging it at ERROR, and returns the
// error every call fails with from now on.
func (g *fileGuard) markLost(path, what string) error {
	g.lostOnce.Do(func() {
		err := fmt.Errorf("%w: %s no longer names the file this process opened (%s); restart the process to open the file now at that path",
			cairnqtype.ErrDatabaseReplaced, path, what)
		g.lostErr.Store(&err)
		close(g.lost)
		g.log.Error("cairnq: the SQLite database file was deleted or replaced; this store stops", "path", path, "found", what)
	})
	return g.err()
}

// commitGuarded commits the writer's transaction unless the path no
// longer names the file it would commit to (checked at most every
// fileCheckEvery): the callers of a batch that the check stops get
// ErrDatabaseReplaced, and the rollback keeps nothing.
func (b *sqliteBackend) commitGuarded(c *sqliteConn) error {
	if err := b.guard.checkSoon(); err != nil {
		return err
	}
	return b.commit(c)
}

// Lost returns a channel closed once the store's SQLite file was found
// deleted or replaced (LostErr says which), after which every call fails
// with ErrDatabaseReplaced. It is nil, blocking forever, on Postgres and
// for an in-memory database.
func (s *Store) Lost() <-chan struct{} { return s.guard.Lost() }

// LostErr returns the ErrDatabaseReplaced every call fails with once
// Lost is closed, and nil before.
func (s *Store) LostErr() error { return s.guard.err() }

// Gone reports whether err says a store serves nothing more: closed, or
// its SQLite file deleted or replaced. No retry mends either.
func Gone(err error) bool {
	return errors.Is(err, cairnqtype.ErrClosed) || errors.Is(err, cairnqtype.ErrDatabaseReplaced)
}
