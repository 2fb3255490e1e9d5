package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/testkit/readonly"
)

// bigValue is a JSON string value of about n bytes.
func bigValue(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n) + `"`)
}

// A statement that exhausts the embedded SQLite's memory fails alone: the
// write connection it panicked on is replaced, every later write and read
// works, and Close does not panic. Before, the connection was kept and
// every later write failed with "API misuse" until Close panicked.
func TestSQLiteOutOfMemoryDoesNotPoisonTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, t.TempDir()+"/tasks.db", SQLiteOptions{memoryLimit: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	for range 8 {
		if _, err := st.Submit(ctx, SubmitParams{Name: "big", Payload: bigValue(8 << 20)}); err != nil {
			t.Fatalf("submitting one 8 MB task: %v", err)
		}
	}
	// One claim returning eight 8 MB rows does not fit in 128 MB.
	_, err = st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, WorkerID: "w", Limit: 8})
	if !errors.Is(err, cairnqtype.ErrStorageMemory) {
		t.Fatalf("claim past the memory: err = %v, want ErrStorageMemory", err)
	}
	var se *cairnqtype.StorageError
	if !errors.As(err, &se) {
		t.Fatalf("claim past the memory: %T, want *StorageError", err)
	}
	// Nothing of the failed claim was kept.
	stats, err := st.Stats(ctx, cairnqtype.DefaultQueue)
	if err != nil {
		t.Fatal(err)
	}
	if c := stats[cairnqtype.DefaultQueue]; c.Queued != 8 || c.Running != 0 {
		t.Fatalf("after the failed claim: %+v, want 8 queued and none running", c)
	}
	// Writes and reads go on.
	for i := range 20 {
		if _, err := st.Submit(ctx, SubmitParams{Name: "small", Payload: i}); err != nil {
			t.Fatalf("submit %d after the fault: %v", i, err)
		}
	}
	got, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, WorkerID: "w", Names: []string{"big"}, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("claiming one big task after the fault: %d tasks, %v", len(got), err)
	}
	if _, err := st.Complete(ctx, got[0].ID, "w", map[string]int{"ok": 1}); err != nil {
		t.Fatalf("settling after the fault: %v", err)
	}
	if n, err := st.List(ctx, cairnqtype.ListOptions{Name: "small"}); err != nil || len(n) != 20 {
		t.Fatalf("listing after the fault: %d tasks, %v", len(n), err)
	}
}

// A read that exhausts a read connection's memory fails alone; the pool
// keeps its size and later reads work.
func TestSQLiteReadOutOfMemoryReplacesTheConnection(t *testing.T) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, t.TempDir()+"/tasks.db", SQLiteOptions{memoryLimit: 128 << 20, ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 16 {
		if _, err := st.Submit(ctx, SubmitParams{Name: "big", Payload: bigValue(8 << 20)}); err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	// Sorting sixteen 8 MB rows by payload holds them all at once.
	err = st.be.read(ctx, func(q querier) error {
		_, err := q.query(ctx, "SELECT payload FROM cairnq_tasks ORDER BY payload, id", nil)
		return err
	})
	if !errors.Is(err, cairnqtype.ErrStorageMemory) {
		t.Fatalf("read past the memory: err = %v, want ErrStorageMemory", err)
	}
	for range 3 { // the one read connection was replaced, not lost
		if _, err := st.Stats(ctx, ""); err != nil {
			t.Fatalf("read after the fault: %v", err)
		}
	}
}

// A write the disk cannot hold is a *StorageError saying the storage is
// full (ErrStorageFull), not a bare "disk I/O error"; nothing of it is
// kept, and smaller writes go on. SQLite's page cap stands in for a full
// disk: it fails the write with the same FULL code.
func TestSQLiteFullDiskIsAStorageError(t *testing.T) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, t.TempDir()+"/tasks.db", SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pages int64
	err = st.be.write(ctx, func(q querier) error {
		rows, err := q.query(ctx, "PRAGMA page_count", nil)
		if err != nil {
			return err
		}
		pages, _, err = asInt64("page_count", rows[0]["page_count"])
		if err != nil {
			return err
		}
		_, err = q.query(ctx, "PRAGMA max_page_count = "+strconv.FormatInt(pages+8, 10), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Submit(ctx, SubmitParams{Name: "big", Payload: bigValue(1 << 20)})
	var se *cairnqtype.StorageError
	if !errors.Is(err, cairnqtype.ErrStorageFull) || !errors.As(err, &se) {
		t.Fatalf("a write past the space left: %v, want a *StorageError with ErrStorageFull", err)
	}
	if _, err := st.Submit(ctx, SubmitParams{Name: "small"}); err != nil {
		t.Fatalf("a small write after: %v", err)
	}
	if tasks, err := st.List(ctx, cairnqtype.ListOptions{}); err != nil || len(tasks) != 1 || tasks[0].Name != "small" {
		t.Fatalf("after the full write: %d tasks, %v; want only the small one", len(tasks), err)
	}
}

// A real file system that fills up: the driver reports ENOSPC from a
// write as a bare IOERR_WRITE ("disk I/O error"), which must still come
// back as ErrStorageFull, lose nothing acknowledged, and leave the store
// writing again once room is made. It needs a small file system of its
// own, a tmpfs mounted for the test, so it runs as root (as CI does).
func TestSQLiteFullFileSystemIsAStorageError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	// Room to free later, so the store can be shown writing again.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := OpenSQLite(ctx, filepath.Join(dir, "tasks.db"), SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var acked []string
	for range 1000 {
		task, err := st.Submit(ctx, SubmitParams{Name: "big", Payload: bigValue(16 << 10)})
		if err != nil {
			var se *cairnqtype.StorageError
			if !errors.Is(err, cairnqtype.ErrStorageFull) || !errors.As(err, &se) {
				t.Fatalf("a write past the room left: %v (%T), want a *StorageError with ErrStorageFull", err, err)
			}
			break
		}
		acked = append(acked, task.ID)
	}
	if len(acked) == 0 || len(acked) == 1000 {
		t.Fatalf("%d writes succeeded: the file system never filled, or nothing fit", len(acked))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Submit(ctx, SubmitParams{Name: "after"}); err != nil {
		t.Fatalf("a write once room was made: %v", err)
	}
	for _, id := range acked {
		if _, err := st.Get(ctx, id); err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
	}
}

// readOnlyCopy returns the path of a database, with a task in it, that
// this process can only read, and says how.
func readOnlyCopy(t *testing.T) (path, how string) {
	t.Helper()
	dir := t.TempDir()
	st, err := OpenSQLite(context.Background(), filepath.Join(dir, "tasks.db"), SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Submit(context.Background(), SubmitParams{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ro, how := readonly.Dir(t, dir)
	return filepath.Join(ro, "tasks.db"), how
}

// A database this process may only read opens with OpenExisting, reads
// work, and a write is a *StorageError saying permission denied
// (ErrStorageReadOnly) that keeps nothing. Before, the open itself failed,
// as ErrNoDatabase.
func TestSQLiteReadOnlyFileOpensForReading(t *testing.T) {
	path, how := readOnlyCopy(t)
	ctx := context.Background()
	if st, err := InspectSQLite(ctx, path); err != nil || st.State != cairnqtype.SchemaCurrent {
		t.Fatalf("inspect on %s: %+v, %v", how, st, err)
	}
	st, err := OpenSQLite(ctx, path, SQLiteOptions{OpenExisting: true})
	if err != nil {
		t.Fatalf("OpenExisting on %s: %v", how, err)
	}
	defer st.Close()
	tasks, err := st.List(ctx, cairnqtype.ListOptions{})
	if err != nil || len(tasks) != 1 || tasks[0].Name != "kept" {
		t.Fatalf("list on %s: %d tasks, %v", how, len(tasks), err)
	}
	_, err = st.Submit(ctx, SubmitParams{Name: "refused"})
	var se *cairnqtype.StorageError
	if !errors.Is(err, cairnqtype.ErrStorageReadOnly) || !errors.As(err, &se) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a write on %s: %v, want a *StorageError with ErrStorageReadOnly", how, err)
	}
	if tasks, err := st.List(ctx, cairnqtype.ListOptions{}); err != nil || len(tasks) != 1 {
		t.Fatalf("after the refused write: %d tasks, %v", len(tasks), err)
	}
}

// A live database, its commits still in the write-ahead log, is not read
// as an immutable snapshot through a directory this process cannot write
// (that snapshot would be an older database than the one there is): Open
// says why, as ErrStorageReadOnly.
func TestSQLiteReadOnlyLiveDatabaseIsNotReadStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	ctx := context.Background()
	live, err := OpenSQLite(ctx, path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.Submit(ctx, SubmitParams{Name: "in-the-wal"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Skipf("no write-ahead log to test with (%v)", err)
	}
	ro, how := readonly.Dir(t, dir)
	if _, err := OpenSQLite(ctx, filepath.Join(ro, "tasks.db"), SQLiteOptions{OpenExisting: true}); !errors.Is(err, cairnqtype.ErrStorageReadOnly) {
		t.Fatalf("OpenExisting on a live database behind %s: %v, want ErrStorageReadOnly", how, err)
	}
}
