package engine

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
)

// sustainWrites commits writes one after another until the writer has
// written at least frames pages, and returns how many it wrote.
func sustainWrites(t *testing.T, s *Store, frames int64) int64 {
	t.Helper()
	be := s.be.(*sqliteBackend)
	payload := map[string]string{"pad": strings.Repeat("x", 3000)} // about a page a row
	written := func() int64 {
		var n int64
		err := be.write(context.Background(), func(q querier) error {
			var err error
			n, _, err = q.(sqliteQuerier).c.c.Status(sqlite3.DBSTATUS_CACHE_WRITE, false)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for {
		for range 50 {
			if _, err := s.Submit(context.Background(), SubmitParams{Name: "ckpt", Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
		if n := written(); n >= frames {
			return n
		}
	}
}

// walBound is the largest WAL file ckptForceFrames allows, with one more
// commit's frames on top (the one that crossed it).
func walBound() int64 {
	const frame = 4096 + 24
	return 32 + (ckptForceFrames+64)*frame
}

func TestWALStartsOverWhileWritesContinue(t *testing.T) {
	t.Parallel()
	s, path := openTestStore(t, SQLiteOptions{})
	k := s.be.(*sqliteBackend).ckpt
	written := sustainWrites(t, s, 3*ckptForceFrames)
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// The WAL file never shrinks, so its size is the most it ever held.
	if fi.Size() > walBound() {
		t.Fatalf("WAL grew to %d bytes after %d frames written; it should start over below %d", fi.Size(), written, walBound())
	}
	if k.passes.Load() == 0 {
		t.Fatalf("no background checkpoint ran in %d frames", written)
	}
	if k.failed.Load() {
		t.Fatal("the background checkpoints failed")
	}
}

func TestWALStartsOverWhenBackgroundCheckpointsFail(t *testing.T) {
	t.Parallel()
	s, path := openTestStore(t, SQLiteOptions{})
	k := s.be.(*sqliteBackend).ckpt
	k.failed.Store(true) // as after a failed pass: the writer checkpoints alone
	written := sustainWrites(t, s, 3*ckptForceFrames)
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > walBound() {
		t.Fatalf("WAL grew to %d bytes after %d frames written", fi.Size(), written)
	}
	if n := k.passes.Load(); n != 0 {
		t.Fatalf("%d background passes ran after the failure", n)
	}
}

func TestCloseStopsTheCheckpointer(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	k := s.be.(*sqliteBackend).ckpt
	sustainWrites(t, s, 2*ckptStartFrames)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.done:
	default:
		t.Fatal("the checkpointer still runs after Close")
	}
}

// The writer may kick a pass the moment the last one ends, and Close may
// come at any moment after: stopping the checkpointer must never wait on
// a pass's end that nobody will take. Drives a checkpointer of its own on
// a real database, kicking passes back to back as a writer whose WAL
// stays past the threshold would, then stops it; repeated, since the
// window is a pass's last instructions.
func TestCheckpointerStopsWhilePassesAreKicked(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	be := s.be.(*sqliteBackend)
	for range 100 {
		k := newCheckpointer(be)
		for start := time.Now(); time.Since(start) < 5*time.Millisecond; {
			// Past the threshold, little backfilled: a pass is kicked
			// whenever none runs.
			_ = k.walHook(nil, "main", ckptStartFrames)
		}
		stopped := make(chan struct{})
		go func() {
			k.stop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("stopping the checkpointer hung")
		}
	}
}
