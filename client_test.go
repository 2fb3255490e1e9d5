package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

func TestSubmitDefaultsAndIDs(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	task, err := c.Submit(ctx, "render", map[string]int{"page": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^task_[0-7][0-9A-HJKMNP-TV-Z]{25}$`).MatchString(task.ID) {
		t.Errorf("id %q is not task_ + 26 Crockford characters", task.ID)
	}
	if task.Queue != "default" || task.MaxAttempts != 3 || task.Status != cairnq.StatusQueued ||
		task.RootID != task.ID || string(task.Metadata) != "{}" || string(task.Payload) != `{"page":1}` {
		t.Errorf("defaults: %+v", task)
	}
	second, err := c.Submit(ctx, "render", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(second.Payload) != "{}" {
		t.Errorf("nil payload stored as %s, want {}", second.Payload)
	}
	if second.ID[5:15] < task.ID[5:15] {
		t.Errorf("ids are not time-ordered: %s then %s", task.ID, second.ID)
	}
}

func TestBadInputIsTypedAndWritesNothing(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	self := map[string]any{}
	self["self"] = self
	cases := []struct {
		name    string
		submit  func() error
		wantArg bool
	}{
		{"empty name", func() error { _, err := c.Submit(ctx, "", nil, nil); return err }, true},
		{"unknown conflict", func() error {
			_, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Key: "k", Conflict: "merge"})
			return err
		}, true},
		{"negative delay", func() error {
			_, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Delay: -time.Second})
			return err
		}, true},
		{"negative max attempts", func() error {
			_, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{MaxAttempts: -1})
			return err
		}, true},
		{"metadata not an object", func() error {
			_, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Metadata: []int{1}})
			return err
		}, true},
		{"NaN payload", func() error { _, err := c.Submit(ctx, "x", math.NaN(), nil); return err }, false},
		{"+Inf in a map", func() error { _, err := c.Submit(ctx, "x", map[string]float64{"v": math.Inf(1)}, nil); return err }, false},
		{"-Inf metadata", func() error {
			_, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Metadata: map[string]float64{"v": math.Inf(-1)}})
			return err
		}, false},
		{"channel", func() error { _, err := c.Submit(ctx, "x", make(chan int), nil); return err }, false},
		{"func", func() error { _, err := c.Submit(ctx, "x", func() {}, nil); return err }, false},
		{"cycle", func() error { _, err := c.Submit(ctx, "x", self, nil); return err }, false},
		{"invalid raw JSON", func() error { _, err := c.Submit(ctx, "x", json.RawMessage("{"), nil); return err }, false},
		{"negative list limit", func() error { _, err := c.List(ctx, &cairnq.ListOptions{Limit: -1}); return err }, true},
		{"unknown list status", func() error { _, err := c.List(ctx, &cairnq.ListOptions{Status: "done"}); return err }, true},
		{"negative purge limit", func() error { _, err := c.Purge(ctx, &cairnq.PurgeOptions{Limit: -1}); return err }, true},
		{"live purge status", func() error { _, err := c.Purge(ctx, &cairnq.PurgeOptions{Status: cairnq.StatusQueued}); return err }, true},
		{"negative queue depth", func() error { _, err := c.QueueHeadroom(ctx, "q", -1); return err }, true},
	}
	for _, tc := range cases {
		err := tc.submit()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.wantArg {
			var ae *cairnq.ArgumentError
			if !errors.Is(err, cairnq.ErrInvalidArgument) || !errors.As(err, &ae) {
				t.Errorf("%s: %v is not an ArgumentError", tc.name, err)
			}
		} else {
			var se *cairnq.SerializationError
			if !errors.As(err, &se) {
				t.Errorf("%s: %v (%T) is not a SerializationError", tc.name, err, err)
			}
		}
	}
	if n := countTasks(t, c); n != 0 {
		t.Errorf("bad input wrote %d tasks", n)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := cairnq.Open(ctx, notDB, nil)
	if !errors.Is(err, cairnq.ErrNotADatabase) {
		t.Errorf("opening a text file: %v, want ErrNotADatabase", err)
	}
	if b, _ := os.ReadFile(notDB); !strings.HasPrefix(string(b), "this is not") {
		t.Error("opening a text file changed it")
	}

	if _, err := cairnq.Open(ctx, "", nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("empty path: %v", err)
	}

	if os.Geteuid() != 0 { // root writes through read-only modes
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		_, err = cairnq.Open(ctx, filepath.Join(ro, "sub", "tasks.db"), nil)
		var oe *cairnq.OpenError
		if !errors.As(err, &oe) {
			t.Errorf("read-only directory: %v (%T), want *OpenError", err, err)
		}
	}
	// A path under a regular file can never be created, root or not.
	_, err = cairnq.Open(ctx, filepath.Join(notDB, "sub", "tasks.db"), nil)
	var oe *cairnq.OpenError
	if !errors.As(err, &oe) {
		t.Errorf("path under a file: %v (%T), want *OpenError", err, err)
	}
}

func TestNewerProtocolVersionIsRefusedUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "deep", "er", "tasks.db") // parents are created
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	execSQL(t, path, "UPDATE cairnq_meta SET value = '2' WHERE key = 'protocol_version'; DELETE FROM cairnq_migrations WHERE name = '0010_drop_status_index.sql'")
	ledger, _ := readLedger(t, path)

	_, err = cairnq.Open(ctx, path, nil)
	var pv *cairnq.ProtocolVersionMismatchError
	if !errors.As(err, &pv) || pv.Found != 2 || pv.Supported != 1 {
		t.Fatalf("open of protocol 2: %v, want ProtocolVersionMismatchError{2, 1}", err)
	}
	after, meta := readLedger(t, path)
	if len(after) != len(ledger) || meta["protocol_version"] != "2" {
		t.Errorf("refused database was written to: ledger %d -> %d rows, meta %v", len(ledger), len(after), meta)
	}
}

func TestMemoryDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, ":memory:", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	task, err := c.Submit(ctx, "x", map[string]int{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, task.ID)
	if err != nil || got.ID != task.ID {
		t.Fatalf("get: %v %v", got, err)
	}
}

func TestGetMissing(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	if _, err := c.Get(ctx, "task_00000000000000000000000000"); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("Get: %v", err)
	}
	if _, err := c.GetByKey(ctx, "nope"); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("GetByKey: %v", err)
	}
	if _, err := c.GetStatus(ctx, "nope"); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("GetStatus: %v", err)
	}
	if task, err := c.Cancel(ctx, "nope"); task != nil || err != nil {
		t.Errorf("Cancel of nothing: %v %v", task, err)
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	c.Close()
	ctx := context.Background()
	if _, err := c.Submit(ctx, "x", nil, nil); !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("submit after close: %v", err)
	}
	if _, err := c.Get(ctx, "x"); !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("get after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// A negative BusyTimeout is refused like every other negative duration,
// before anything is created.
func TestOpenRefusesANegativeBusyTimeout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "tasks.db")
	_, err := cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{BusyTimeout: -1})
	var ae *cairnq.ArgumentError
	if !errors.As(err, &ae) || ae.Arg != "BusyTimeout" {
		t.Fatalf("Open with BusyTimeout -1 = %v, want an *ArgumentError for BusyTimeout", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused Open created %s (%v)", filepath.Dir(path), err)
	}
}
