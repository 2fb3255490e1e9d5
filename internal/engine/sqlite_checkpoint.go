package engine

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3"
)

// SQLite's own automatic checkpoint runs inside the commit that takes the
// WAL past 1,000 frames, on the connection that committed: for cairnq
// that is the one writer, which then holds every caller while the
// checkpoint syncs the WAL, copies its pages into the database and syncs
// that: the writer's largest stall, nearly all of it waiting on the disk
// (docs/benchmarks.md).
//
// The writer instead hands the bulk of that work to a connection of its
// own (checkpointer): a PASSIVE checkpoint there copies and syncs while
// the writer goes on committing. Only the frames appended meanwhile are
// left, and the writer checkpoints those itself (~3 ms), so that its next
// transaction starts the WAL over from the beginning. That last step has
// to be the writer's: SQLite reuses the WAL only once every frame in it
// has been copied, which a checkpoint running beside a writer that keeps
// appending never sees.
const (
	// ckptStartFrames is where a background pass starts: SQLite's default
	// automatic checkpoint threshold. The WAL then grows by what the
	// writer appends during the pass before the writer finishes it and
	// starts over.
	ckptStartFrames = 1000
	// ckptFinishFrames is the most the writer copies itself to finish.
	ckptFinishFrames = 256
	// ckptForceFrames bounds the WAL (16 MiB of 4 KiB pages) when the
	// background cannot keep up: past it the writer checkpoints itself
	// whatever is left, as SQLite would.
	ckptForceFrames = 4000
)

// checkpointer runs the background checkpoint passes of one store. The
// writer's WAL hook starts them (walHook); the backend owns the goroutine
// and stops it on close.
type checkpointer struct {
	b *sqliteBackend
	// kick hands the goroutine a pass to run, as the channel it closes when
	// the pass ends (capacity 1: the writer kicks only once the last pass
	// has ended, so after the goroutine took it).
	kick chan chan struct{}
	quit chan struct{}
	done chan struct{}
	// pass is the last pass the writer kicked, closed once it has ended;
	// nil before the first. The writer's alone: it never checkpoints
	// during a pass, and past ckptForceFrames it waits for the pass to
	// end. (A flag the pass cleared and a token it then sent lost the
	// token to a kick between the two, and the next pass's end then
	// blocked forever, with Close waiting on it.)
	pass chan struct{}
	// backfilled is how many frames of the WAL the last pass left copied;
	// the writer resets it when the WAL starts over.
	backfilled atomic.Int64
	// failed makes the writer checkpoint by itself, as SQLite would: the
	// background connection could not be opened or its checkpoint failed
	// for another reason than a lock another process held.
	failed atomic.Bool
	passes atomic.Int64 // background passes that checkpointed
}

func newCheckpointer(b *sqliteBackend) *checkpointer {
	k := &checkpointer{b: b, kick: make(chan chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go k.run()
	return k
}

// walHook is the writer connection's WAL hook, which replaces SQLite's
// automatic checkpoint on it: SQLite calls it after every commit with the
// frames now in the WAL. It never fails the commit, which has happened.
func (k *checkpointer) walHook(db *sqlite3.Conn, schema string, frames int) error {
	if frames < ckptStartFrames {
		k.backfilled.Store(0) // the WAL started over
		return nil
	}
	if k.passRunning() {
		if frames < ckptForceFrames {
			return nil
		}
		// The background pass cannot keep up (a slow disk): wait for it
		// and finish here, so the WAL stays bounded as SQLite's own
		// checkpoint would keep it, rather than growing while it runs.
		<-k.pass
	}
	left := int64(frames) - k.backfilled.Load()
	if k.failed.Load() || left <= ckptFinishFrames || frames >= ckptForceFrames {
		// An error here is another connection's lock (it checkpoints, or
		// reads an old snapshot): the next commit tries again.
		_, _, _ = db.WALCheckpoint(schema, sqlite3.CHECKPOINT_PASSIVE)
		k.backfilled.Store(0)
		return nil
	}
	k.pass = make(chan struct{})
	k.kick <- k.pass // never blocks: no pass runs, so the slot is empty
	return nil
}

// passRunning reports whether the pass the writer kicked last is still
// running.
func (k *checkpointer) passRunning() bool {
	if k.pass == nil {
		return false
	}
	select {
	case <-k.pass:
		return false
	default:
		return true
	}
}

func (k *checkpointer) run() {
	defer close(k.done)
	var c *sqliteConn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	for {
		var pass chan struct{}
		select {
		case <-k.quit:
			return
		case pass = <-k.kick:
		}
		if c == nil && !k.failed.Load() {
			var err error
			if c, err = k.b.openConn(context.Background()); err != nil {
				c = nil
				k.fail("opening the checkpoint connection", err)
			}
		}
		if c != nil {
			var n int
			// The driver panics where SQLite runs out of memory; the
			// connection is then discarded, as the writer's would be.
			err, panicked := runGuarded(func() (err error) {
				_, n, err = c.c.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
				return err
			})
			switch {
			case panicked:
				c.closeAfterPanic()
				c = nil
				k.fail("checkpointing the WAL", err)
			case err == nil:
				k.backfilled.Store(int64(n))
				k.passes.Add(1)
			case !errors.Is(err, sqlite3.BUSY):
				k.fail("checkpointing the WAL", err)
			}
		}
		close(pass)
	}
}

// fail hands checkpoints back to the writer for the store's life.
func (k *checkpointer) fail(what string, err error) {
	k.failed.Store(true)
	k.b.log.Warn("cairnq: "+what+" in the background; the writer checkpoints itself from now on", "err", err)
}

func (k *checkpointer) stop() {
	close(k.quit)
	<-k.done
}
