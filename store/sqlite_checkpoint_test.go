package store

import (
	"context"
	"os"
	"strings"
	"testing"

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
