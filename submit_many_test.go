package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// manyItems is a batch exercising every option Submit takes.
func manyItems() []cairnq.SubmitItem {
	var items []cairnq.SubmitItem
	for i := range 12 {
		it := cairnq.SubmitItem{Name: fmt.Sprintf("many.%d", i%3), Payload: map[string]any{"i": i, "s": "naïve \"q\" {,} NULL"}}
		o := &it.Options
		o.Queue = []string{"", "bulk-a", "bulk-b"}[i%3]
		o.Priority = i - 6
		o.MaxAttempts = i % 4 // 0: the default
		o.Delay = time.Duration(i%2) * time.Hour
		if i%3 == 1 {
			o.Metadata = map[string]any{"m": i}
		}
		if i%4 == 2 {
			o.ParentID, o.RootID, o.CorrelationID = "task_parent", "task_root", fmt.Sprintf("corr-%d", i)
		}
		if i%5 == 4 {
			o.Key = fmt.Sprintf("many-key-%d", i)
		}
		if i == 7 {
			it.Payload = nil // {}
		}
		items = append(items, it)
	}
	return items
}

// sameAsSubmitted compares a task a batch wrote with one Submit wrote for
// the same item: every column but the id, the times (within a minute of
// each other, the delay kept) and a default root id (the task's own).
func sameAsSubmitted(t *testing.T, i int, got, want *cairnq.Task) {
	t.Helper()
	root := func(x *cairnq.Task) string {
		if x.RootID == x.ID {
			return "(self)"
		}
		return x.RootID
	}
	type cols struct {
		Name, Queue, Root, Parent, Corr string
		Status                          cairnq.Status
		Payload, Metadata               string
		MaxAttempts, Priority, Attempt  int
	}
	of := func(x *cairnq.Task) cols {
		return cols{x.Name, x.Queue, root(x), x.ParentID, x.CorrelationID, x.Status, string(x.Payload), string(x.Metadata),
			x.MaxAttempts, x.Priority, x.Attempt}
	}
	if of(got) != of(want) {
		t.Errorf("item %d: the batch wrote %+v, Submit %+v", i, of(got), of(want))
	}
	if d := got.RunAt.Sub(got.CreatedAt) - want.RunAt.Sub(want.CreatedAt); d.Abs() > time.Minute {
		t.Errorf("item %d: run_at - created_at differs by %v from Submit's", i, d)
	}
	if got.CreatedAt.Sub(want.CreatedAt).Abs() > time.Minute || got.UpdatedAt.IsZero() || !got.CompletedAt.IsZero() || got.WorkerID != "" {
		t.Errorf("item %d: times and lease %+v, Submit's %+v", i, got, want)
	}
}

func TestSubmitManyWritesWhatSubmitWrites(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		items := manyItems()
		tasks, err := c.SubmitMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != len(items) {
			t.Fatalf("%d tasks for %d items", len(tasks), len(items))
		}
		var batchIDs []string
		for _, tk := range tasks {
			batchIDs = append(batchIDs, tk.ID)
		}
		if !slices.IsSorted(batchIDs) {
			t.Errorf("the batch's ids are not in its order: %v", batchIDs)
		}
		for i, it := range items {
			opts := it.Options
			single, err := c.Submit(ctx, it.Name, it.Payload, &opts)
			if err != nil {
				t.Fatal(err)
			}
			if it.Options.Key != "" {
				// Submit after the batch meets the batch's task (reuse).
				if single.ID != tasks[i].ID {
					t.Errorf("item %d: a Submit with its key returned %s, not the batch's %s", i, single.ID, tasks[i].ID)
				}
				if _, err := c.CancelByKey(ctx, it.Options.Key); err != nil {
					t.Fatal(err)
				}
				if single, err = c.Submit(ctx, it.Name, it.Payload, &opts); err != nil {
					t.Fatal(err)
				}
				got, err := c.GetByKey(ctx, it.Options.Key)
				if err != nil || got.ID != single.ID {
					t.Fatalf("item %d: key points at %v (%v), want Submit's %s", i, got, err, single.ID)
				}
			}
			stored, err := c.Get(ctx, tasks[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			if it.Options.Key != "" {
				stored.Status = cairnq.StatusQueued // canceled by the test above
			}
			// What SubmitMany returned is what it stored...
			sameAsSubmitted(t, i, tasks[i], stored)
			// ...and what Submit stores for the same item.
			sameAsSubmitted(t, i, tasks[i], single)
		}
	})
}

// Every task SubmitMany returns is, field for field, what reading it back
// returns: on Postgres insert_many sends back only the columns the server
// decides or rewrites (jsonb prints JSON its own way: here a key order and
// spacing it changes) and the store fills in the rest from the batch.
func TestSubmitManyReturnsTheStoredRows(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		items := manyItems()
		items[3].Payload = json.RawMessage(`{"zz": 1.50,"a" :[true,null, "\u00e9"]}`)
		items[5].Options.Metadata = json.RawMessage(`{"b":{"y":1,"x":2},"a":""}`)
		tasks, err := c.SubmitMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		sameAsStored(t, c, tasks)
	})
}

// sameAsStored checks that each task a batch returned is, field for
// field, what reading it back returns.
func sameAsStored(t *testing.T, c *cairnq.Client, tasks []*cairnq.Task) {
	t.Helper()
	for i, tk := range tasks {
		stored, err := c.Get(t.Context(), tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tk, stored) {
			t.Errorf("item %d: the batch returned\n%+v\nthe stored row reads\n%+v", i, tk, stored)
		}
	}
}

// keyedStep is one keyed submit of the model test: a key and a strategy.
type keyedStep struct {
	key      string
	conflict cairnq.Conflict
}

// keyedOutcome describes what a sequence of keyed submits did, in terms
// that do not depend on ids: for each step, which step's task it
// returned and that task's status; then each step's task's final status
// and which step's task each key points at.
type keyedOutcome struct {
	returned []string
	final    []string
	keys     map[string]int
	errIndex int
	err      string
}

func describe(t *testing.T, c *cairnq.Client, steps []keyedStep, tasks []*cairnq.Task, errIndex int, err error) keyedOutcome {
	t.Helper()
	ctx := context.Background()
	out := keyedOutcome{keys: map[string]int{}, errIndex: errIndex}
	if err != nil {
		out.err = fmt.Sprintf("%T", errors.Unwrap(err))
		if !errors.Is(err, cairnq.ErrAlreadyExists) {
			t.Fatalf("unexpected error: %v", err)
		}
	}
	owner := map[string]int{} // task id -> the first step that returned it
	for i, tk := range tasks {
		if tk == nil {
			continue
		}
		if _, ok := owner[tk.ID]; !ok {
			owner[tk.ID] = i
		}
		out.returned = append(out.returned, fmt.Sprintf("%d:%s", owner[tk.ID], tk.Status))
	}
	for _, tk := range tasks {
		if tk == nil {
			continue
		}
		got, err := c.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		out.final = append(out.final, string(got.Status))
	}
	for _, s := range steps {
		got, err := c.GetByKey(ctx, s.key)
		if errors.Is(err, cairnq.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		plain := strings.SplitN(s.key, "-", 3)[2] // without the run's prefix
		if i, ok := owner[got.ID]; ok {
			out.keys[plain] = i
		} else {
			out.keys[plain] = -1 // a task from before the steps
		}
	}
	return out
}

// TestSubmitManyKeysAsSubmitsInOrder checks the duplicate-key rule: a
// batch does what the same Submits one after another do, for every
// strategy, keys repeated within the batch and keys taken before it.
func TestSubmitManyKeysAsSubmitsInOrder(t *testing.T) {
	t.Parallel()
	const (
		reuse = cairnq.ConflictReuse
		rs    = cairnq.ConflictReuseSucceeded
		rep   = cairnq.ConflictReplace
		rej   = cairnq.ConflictReject
	)
	cases := map[string][]keyedStep{
		"reuse twice":            {{"a", reuse}, {"a", reuse}, {"b", ""}, {"b", reuse}},
		"reuse-succeeded twice":  {{"a", rs}, {"a", rs}},
		"replace within":         {{"a", reuse}, {"a", rep}, {"a", reuse}, {"a", rep}},
		"reject within":          {{"a", reuse}, {"b", reuse}, {"a", rej}},
		"reject first":           {{"a", rej}, {"b", rep}},
		"taken before, reuse":    {{"pre-live", reuse}, {"pre-done", reuse}, {"pre-done", reuse}},
		"taken before, replace":  {{"pre-live", rep}, {"pre-done", rep}},
		"taken before, reject":   {{"x", reuse}, {"pre-done", rej}},
		"taken before, rs":       {{"pre-live", rs}, {"pre-done", rs}},
		"interleaved":            {{"a", reuse}, {"b", rep}, {"a", rep}, {"b", reuse}, {"c", rej}, {"a", reuse}},
		"replace then reject it": {{"pre-live", rep}, {"pre-live", rej}},
	}
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		n := 0
		for name, steps := range cases {
			t.Run(name, func(t *testing.T) {
				n++
				prefix := func(p string) func(k string) string {
					return func(k string) string { return fmt.Sprintf("%s-%d-%s", p, n, k) }
				}
				run := func(p string, batch bool) keyedOutcome {
					key := prefix(p)
					// The state before: one live task and one canceled one.
					if _, err := c.Submit(ctx, "keyed", nil, &cairnq.SubmitOptions{Key: key("pre-live")}); err != nil {
						t.Fatal(err)
					}
					done, err := c.Submit(ctx, "keyed", nil, &cairnq.SubmitOptions{Key: key("pre-done")})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := c.Cancel(ctx, done.ID); err != nil {
						t.Fatal(err)
					}
					keyed := make([]keyedStep, len(steps))
					for i, s := range steps {
						keyed[i] = keyedStep{key(s.key), s.conflict}
					}
					if batch {
						items := make([]cairnq.SubmitItem, len(steps))
						for i, s := range keyed {
							items[i] = cairnq.SubmitItem{Name: "keyed", Payload: i, Options: cairnq.SubmitOptions{Key: s.key, Conflict: s.conflict}}
						}
						before := countTasks(t, c)
						tasks, err := c.SubmitMany(ctx, items)
						var ie *cairnq.SubmitItemError
						if errors.As(err, &ie) {
							if after := countTasks(t, c); after != before {
								t.Errorf("a failed batch wrote %d tasks", after-before)
							}
							if live, err := c.GetByKey(ctx, key("pre-live")); err != nil || live.Status != cairnq.StatusQueued {
								t.Errorf("after a failed batch the live task is %v (%v); want it queued still", live, err)
							}
							return describe(t, c, nil, nil, ie.Index, err)
						}
						return describe(t, c, keyed, tasks, -1, err)
					}
					var tasks []*cairnq.Task
					for i, s := range keyed {
						tk, err := c.Submit(ctx, "keyed", i, &cairnq.SubmitOptions{Key: s.key, Conflict: s.conflict})
						if err != nil {
							// A batch writes nothing when an item fails: undo
							// what the Submits before it did by comparing
							// only the error's place.
							return describe(t, c, nil, nil, i, &cairnq.SubmitItemError{Index: i, Err: err})
						}
						tasks = append(tasks, tk)
					}
					return describe(t, c, keyed, tasks, -1, nil)
				}
				want, got := run("single", false), run("batch", true)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("steps %v:\nSubmitMany: %+v\nSubmits:    %+v", steps, got, want)
				}
			})
		}
	})
}

func TestSubmitManyBadItemWritesNothing(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		bad := map[string]struct {
			item cairnq.SubmitItem
			as   func(error) bool
		}{
			"no name": {cairnq.SubmitItem{}, func(err error) bool { var a *cairnq.ArgumentError; return errors.As(err, &a) }},
			"NaN payload": {cairnq.SubmitItem{Name: "x", Payload: math.NaN()},
				func(err error) bool { var s *cairnq.SerializationError; return errors.As(err, &s) }},
			"bad conflict": {cairnq.SubmitItem{Name: "x", Options: cairnq.SubmitOptions{Key: "k", Conflict: "nope"}},
				func(err error) bool { var a *cairnq.ArgumentError; return errors.As(err, &a) }},
			"metadata not an object": {cairnq.SubmitItem{Name: "x", Options: cairnq.SubmitOptions{Metadata: []int{1}}},
				func(err error) bool { var a *cairnq.ArgumentError; return errors.As(err, &a) }},
		}
		for name, b := range bad {
			items := manyItems()
			items = slices.Insert(items, 5, b.item)
			tasks, err := c.SubmitMany(ctx, items)
			var ie *cairnq.SubmitItemError
			if !errors.As(err, &ie) || ie.Index != 5 || !errors.Is(err, cairnq.ErrInvalidArgument) || !b.as(err) {
				t.Errorf("%s at index 5: tasks %v, err %v; want a *SubmitItemError with index 5 wrapping the item's error", name, tasks, err)
			}
			if n := countTasks(t, c); n != 0 {
				t.Fatalf("%s: a batch with a bad item wrote %d tasks", name, n)
			}
		}
	})
}

func TestSubmitManyLimitAndEmpty(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		items := make([]cairnq.SubmitItem, cairnq.MaxSubmitMany+1)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: "x"}
		}
		_, err := c.SubmitMany(ctx, items)
		var ae *cairnq.ArgumentError
		var ie *cairnq.SubmitItemError
		if !errors.As(err, &ae) || ae.Arg != "batch" || errors.As(err, &ie) {
			t.Errorf("a batch past the limit: %v; want an *ArgumentError for the batch", err)
		}
		rows := make([]cairnqtype.SubmitItem, len(items))
		for i := range rows {
			rows[i] = cairnqtype.SubmitItem{Name: "x"}
		}
		if _, err := c.Store().SubmitMany(ctx, rows); !errors.As(err, &ae) {
			t.Errorf("Store.SubmitMany past the limit: %v; want an *ArgumentError", err)
		}
		for _, empty := range [][]cairnq.SubmitItem{nil, {}} {
			tasks, err := c.SubmitMany(ctx, empty)
			if err != nil || tasks == nil || len(tasks) != 0 {
				t.Errorf("SubmitMany(%#v) = %#v, %v; want an empty slice and no error", empty, tasks, err)
			}
		}
		if n := countTasks(t, c); n != 0 {
			t.Errorf("the limit and empty batches wrote %d tasks", n)
		}
		tasks, err := c.SubmitMany(ctx, items[:cairnq.MaxSubmitMany])
		if err != nil || len(tasks) != cairnq.MaxSubmitMany {
			t.Fatalf("a batch at the limit: %d tasks, %v", len(tasks), err)
		}
		if n := countTasks(t, c); n != cairnq.MaxSubmitMany {
			t.Errorf("a batch at the limit wrote %d tasks", n)
		}
		//nolint:staticcheck // a nil context is what is being tested
		if _, err := c.SubmitMany(nil, items[:1]); !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("a nil context: %v", err)
		}
	})
}

var errRefused = errors.New("refused by a hook")

func TestSubmitManyRunsHooksPerTask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var before, after []string
	hook := func(ctx context.Context, s *cairnq.Submission, next func(ctx context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		mu.Lock()
		before = append(before, s.Name)
		mu.Unlock()
		if s.Name == "refuse" {
			return nil, errRefused
		}
		if s.Name == "fake" {
			return &cairnq.Task{ID: "task_fake", Name: "fake"}, nil
		}
		if err := s.SetMetadata("hooked", s.Name); err != nil {
			return nil, err
		}
		s.Options.Priority = 7
		tk, err := next(ctx)
		mu.Lock()
		after = append(after, fmt.Sprintf("%s:%v:%v", s.Name, tk != nil && tk.Name == s.Name, err != nil))
		mu.Unlock()
		return tk, err
	}
	onBothBackends(t, &cairnq.Options{SubmitHooks: []cairnq.SubmitHook{hook}}, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		mu.Lock()
		before, after = nil, nil
		mu.Unlock()
		items := []cairnq.SubmitItem{{Name: "a"}, {Name: "b", Options: cairnq.SubmitOptions{Key: "hk"}}, {Name: "fake"}, {Name: "c"}}
		tasks, err := c.SubmitMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if fmt.Sprint(before) != "[a b fake c]" || fmt.Sprint(after) != "[a:true:false b:true:false c:true:false]" {
			t.Errorf("hooks ran before next %v and after %v; want once per item, in order", before, after)
		}
		before, after = nil, nil
		mu.Unlock()
		if tasks[2].ID != "task_fake" {
			t.Errorf("a hook's own task is %v in the result", tasks[2])
		}
		for _, i := range []int{0, 1, 3} {
			var md map[string]string
			_ = json.Unmarshal(tasks[i].Metadata, &md)
			if md["hooked"] != items[i].Name || tasks[i].Priority != 7 {
				t.Errorf("task %d: metadata %s, priority %d; want what the hook set", i, tasks[i].Metadata, tasks[i].Priority)
			}
		}
		if n := countTasks(t, c); n != 3 {
			t.Errorf("%d tasks written, want 3 (the hook's own task is not written)", n)
		}

		items = []cairnq.SubmitItem{{Name: "d"}, {Name: "e"}, {Name: "refuse"}, {Name: "f"}}
		_, err = c.SubmitMany(ctx, items)
		var ie *cairnq.SubmitItemError
		if !errors.As(err, &ie) || ie.Index != 2 || !errors.Is(err, errRefused) {
			t.Errorf("a hook refusing item 2: %v; want a *SubmitItemError with index 2 wrapping the hook's error", err)
		}
		mu.Lock()
		// The items before the refused one were parked in next and get the
		// batch's error; the one after it never ran.
		if fmt.Sprint(before) != "[d e refuse]" || fmt.Sprint(after) != "[d:false:true e:false:true]" {
			t.Errorf("hooks ran before next %v and after %v", before, after)
		}
		mu.Unlock()
		if n := countTasks(t, c); n != 3 {
			t.Errorf("a refused batch changed the task count to %d", n)
		}
	})
}

func TestSubmitManyHookPanicReachesCaller(t *testing.T) {
	t.Parallel()
	hook := func(ctx context.Context, s *cairnq.Submission, next func(ctx context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		if s.Name == "boom" {
			panic("hook boom")
		}
		return next(ctx)
	}
	c := openTemp(t, &cairnq.Options{SubmitHooks: []cairnq.SubmitHook{hook}})
	defer func() {
		if p := recover(); p != "hook boom" {
			t.Errorf("recovered %v, want the hook's panic", p)
		}
		if n := countTasks(t, c); n != 0 {
			t.Errorf("a batch whose hook panicked wrote %d tasks", n)
		}
	}()
	_, _ = c.SubmitMany(context.Background(), []cairnq.SubmitItem{{Name: "a"}, {Name: "boom"}})
	t.Error("SubmitMany returned instead of panicking")
}

// TestSubmitManyKeyOrderCannotDeadlock runs two batches at once, again and
// again, naming the same keys in opposite orders. Locking the keys as
// the items come would deadlock them (Postgres detects it and fails one
// with 40P01); the batch locks them in one fixed order first.
func TestSubmitManyKeyOrderCannotDeadlock(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		const keys = 40
		batch := func(reversed bool) []cairnq.SubmitItem {
			items := make([]cairnq.SubmitItem, keys)
			for i := range items {
				k := i
				if reversed {
					k = keys - 1 - i
				}
				items[i] = cairnq.SubmitItem{Name: "dl", Options: cairnq.SubmitOptions{Key: fmt.Sprintf("dl-%d", k), Conflict: cairnq.ConflictReplace}}
			}
			return items
		}
		for round := range 15 {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for j := range 2 {
				wg.Go(func() { _, errs[j] = c.SubmitMany(ctx, batch(j == 1)) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if n := countTasks(t, c); n != 2*15*keys {
			t.Errorf("%d tasks, want %d", n, 2*15*keys)
		}
	})
}

func TestTaskDefSubmitMany(t *testing.T) {
	t.Parallel()
	type mail struct{ To string }
	send := cairnq.Define[mail, struct{}]("mail.send")
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		tasks, err := send.SubmitMany(ctx, c, []mail{{"a"}, {"b"}}, &cairnq.SubmitOptions{Queue: "mail"})
		if err != nil {
			t.Fatal(err)
		}
		for i, to := range []string{"a", "b"} {
			var m mail
			if err := tasks[i].DecodePayload(&m); err != nil || m.To != to || tasks[i].Queue != "mail" || tasks[i].Name != "mail.send" {
				t.Errorf("task %d: %+v (%v)", i, tasks[i], err)
			}
		}
		_, err = send.SubmitMany(ctx, c, []mail{{"a"}, {"b"}}, &cairnq.SubmitOptions{Key: "one"})
		var ae *cairnq.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("one key for two payloads: %v; want an *ArgumentError", err)
		}
		tasks, err = c.SubmitMany(ctx, []cairnq.SubmitItem{
			send.Item(mail{"c"}, &cairnq.SubmitOptions{Key: "mail-c"}),
			send.Item(mail{"c"}, &cairnq.SubmitOptions{Key: "mail-c"}),
		})
		if err != nil || tasks[0].ID != tasks[1].ID {
			t.Errorf("two items with one key: %v, %v; want the first's task twice", tasks, err)
		}
		if n := countTasks(t, c); n != 3 {
			t.Errorf("%d tasks, want 3", n)
		}
	})
}

func TestSubmitManyTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ex := openPostgresApp(t, nil)
	items := []cairnq.SubmitItem{
		{Name: "tx.a"}, {Name: "tx.b", Options: cairnq.SubmitOptions{Key: "tx-k1"}},
		{Name: "tx.c", Options: cairnq.SubmitOptions{Key: "tx-k2"}}, {Name: "tx.d", Options: cairnq.SubmitOptions{Key: "tx-k1"}},
	}
	errRollback := errors.New("roll back")
	err := ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		tasks, err := c.SubmitManyTx(ctx, sess, items)
		if err != nil {
			return err
		}
		if _, err := c.Get(ctx, tasks[0].ID); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("a task of an uncommitted batch is visible outside its transaction: %v", err)
		}
		rows, err := sess.Query(ctx, "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
		if err != nil {
			return err
		}
		if n := fmt.Sprint(rows[0]["n"]); n != "2" {
			t.Errorf("the transaction holds %s advisory locks after a batch naming two keys; want 2", n)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n := countTasks(t, c); n != 0 {
		t.Errorf("a rolled-back batch left %d tasks", n)
	}

	var tasks []*cairnq.Task
	err = ex.Tx(ctx, func(ctx context.Context, sess executor.Session) (err error) {
		tasks, err = c.SubmitManyTx(ctx, sess, items)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countTasks(t, c); n != 3 || tasks[3].ID != tasks[1].ID {
		t.Errorf("a committed batch of 4 items, two sharing a key: %d tasks; want 3", n)
	}
	for i, tk := range tasks {
		if got, err := c.Get(ctx, tk.ID); err != nil || got.Name != tk.Name || tk.Name != []string{"tx.a", "tx.b", "tx.c", "tx.b"}[i] {
			t.Errorf("task %d: %+v (%v)", i, got, err)
		}
	}

	// A failed batch leaves nothing of itself, and the transaction usable.
	err = ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		if _, err := c.SubmitTx(ctx, sess, "tx.before", nil, nil); err != nil {
			return err
		}
		_, err := c.SubmitManyTx(ctx, sess, []cairnq.SubmitItem{
			{Name: "tx.e"}, {Name: "tx.f", Options: cairnq.SubmitOptions{Key: "tx-k1", Conflict: cairnq.ConflictReplace}},
			{Name: "tx.g", Options: cairnq.SubmitOptions{Key: "tx-k2", Conflict: cairnq.ConflictReject}},
		})
		var ie *cairnq.SubmitItemError
		if !errors.As(err, &ie) || ie.Index != 2 || !errors.Is(err, cairnq.ErrAlreadyExists) {
			t.Errorf("a batch whose item 2 is rejected: %v", err)
		}
		_, err = c.SubmitTx(ctx, sess, "tx.after", nil, nil)
		return err
	})
	if err != nil {
		t.Fatalf("the transaction after a failed batch: %v", err)
	}
	for name, want := range map[string]int{"tx.before": 1, "tx.after": 1, "tx.e": 0, "tx.f": 0} {
		if got, err := c.List(ctx, &cairnq.ListOptions{Name: name}); err != nil || len(got) != want {
			t.Errorf("%d tasks named %s (%v), want %d", len(got), name, err, want)
		}
	}
	if got, err := c.GetByKey(ctx, "tx-k1"); err != nil || got.ID != tasks[1].ID || got.Status != cairnq.StatusQueued {
		t.Errorf("the failed batch's replace was not undone: %+v (%v)", got, err)
	}

	if _, err := c.SubmitManyTx(ctx, ex, items[:1]); err == nil {
		t.Error("SubmitManyTx on a session in no transaction succeeded; want the savepoint's error")
	}
	lite := openTemp(t, nil)
	if _, err := lite.SubmitManyTx(ctx, nil, items); !errors.Is(err, cairnq.ErrUnsupported) {
		t.Errorf("SubmitManyTx on SQLite: %v", err)
	}
}

// cancelAfterInsert is a session that cancels the batch's context once
// the batch's insert has run, as a deadline falling between two of its
// statements would.
type cancelAfterInsert struct {
	executor.Session
	cancel context.CancelFunc
}

func (s cancelAfterInsert) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	rows, err := s.Session.Query(ctx, sql, args...)
	if strings.Contains(sql, "INSERT INTO cairnq_tasks") {
		s.cancel()
	}
	return rows, err
}

// A batch whose context ends midway is undone all the same: the
// application's transaction commits nothing of it.
func TestSubmitManyTxUndoneAfterCtxEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ex := openPostgresApp(t, nil)
	err := ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, err := c.SubmitManyTx(bctx, cancelAfterInsert{sess, cancel}, []cairnq.SubmitItem{
			{Name: "cut.a"}, {Name: "cut.b", Options: cairnq.SubmitOptions{Key: "cut-k"}},
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SubmitManyTx = %v, want context.Canceled", err)
		}
		_, err = c.SubmitTx(ctx, sess, "cut.after", nil, nil)
		return err
	})
	if err != nil {
		t.Fatalf("the transaction after the cut batch: %v", err)
	}
	for name, want := range map[string]int{"cut.a": 0, "cut.b": 0, "cut.after": 1} {
		if got, err := c.List(ctx, &cairnq.ListOptions{Name: name}); err != nil || len(got) != want {
			t.Errorf("%d tasks named %s (%v), want %d", len(got), name, err, want)
		}
	}
	if _, err := c.GetByKey(ctx, "cut-k"); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("the cut batch's key: %v, want ErrNotFound", err)
	}
}

// A gated queue admits a batch once per queue, as one Submit: the batch
// waits for room, and a full queue fails it with the first item bound
// there, writing nothing.
func TestSubmitManyQueueGate(t *testing.T) {
	t.Parallel()
	onBothBackends(t, &cairnq.Options{QueueDepths: map[string]int{"gated": 3}, MaxQueueWait: 50 * time.Millisecond},
		func(t *testing.T, c *cairnq.Client) {
			ctx := context.Background()
			items := []cairnq.SubmitItem{{Name: "free"}, {Name: "g", Options: cairnq.SubmitOptions{Queue: "gated"}},
				{Name: "g", Options: cairnq.SubmitOptions{Queue: "gated"}}, {Name: "g", Options: cairnq.SubmitOptions{Queue: "gated"}}}
			if _, err := c.SubmitMany(ctx, items); err != nil {
				t.Fatalf("a batch filling the gated queue to its limit: %v", err)
			}
			_, err := c.SubmitMany(ctx, items)
			var ie *cairnq.SubmitItemError
			if !errors.Is(err, cairnq.ErrQueueFull) || !errors.As(err, &ie) || ie.Index != 1 {
				t.Errorf("a batch for a full queue: %v; want ErrQueueFull naming item 1", err)
			}
			if n := countTasks(t, c); n != 4 {
				t.Errorf("%d tasks, want the first batch's 4", n)
			}
		})
}

// A hook that holds a lock across next makes every later item's hook wait
// for the batch's write, which waits for them: the batch ends with ctx,
// writes nothing, and leaves no hook running.
func TestSubmitManyHookHoldingALockEndsWithCtx(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var entered, returned atomic.Int64
	hook := func(ctx context.Context, s *cairnq.Submission, next func(ctx context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		defer returned.Add(1)
		entered.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return next(ctx)
	}
	onBothBackends(t, &cairnq.Options{SubmitHooks: []cairnq.SubmitHook{hook}}, func(t *testing.T, c *cairnq.Client) {
		entered.Store(0)
		returned.Store(0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := c.SubmitMany(ctx, []cairnq.SubmitItem{{Name: "a"}, {Name: "b"}, {Name: "c"}})
			errc <- err
		}()
		// b's hook starts only once a's is parked in next, holding mu.
		waitFor(t, "item b's hook to start", func() bool { return entered.Load() == 2 })
		cancel()
		err := <-errc
		var ie *cairnq.SubmitItemError
		if !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("SubmitMany = %v; want a *SubmitItemError for item 1 wrapping context.Canceled", err)
		}
		if n := returned.Load(); n != 2 {
			t.Errorf("%d hooks had returned when SubmitMany did, want 2 (items a and b; c never started)", n)
		}
		if n := countTasks(t, c); n != 0 {
			t.Errorf("the batch wrote %d tasks", n)
		}
	})
}

// A hook that leaves next running on a goroutine of its own and returns
// a task of its own has that task in the result; the late next writes
// nothing and returns an error rather than waiting forever.
func TestSubmitManyLateNextWritesNothing(t *testing.T) {
	t.Parallel()
	late := make(chan error, 1)
	proceed := make(chan struct{}) // closed once SubmitMany returned
	hook := func(ctx context.Context, s *cairnq.Submission, next func(ctx context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		if s.Name != "detached" {
			return next(ctx)
		}
		go func() {
			<-proceed
			_, err := next(ctx)
			late <- err
		}()
		return &cairnq.Task{ID: "task_own", Name: "detached"}, nil
	}
	c := openTemp(t, &cairnq.Options{SubmitHooks: []cairnq.SubmitHook{hook}})
	tasks, err := c.SubmitMany(context.Background(), []cairnq.SubmitItem{{Name: "a"}, {Name: "detached"}, {Name: "b"}})
	close(proceed)
	if err != nil {
		t.Fatal(err)
	}
	if tasks[1].ID != "task_own" {
		t.Errorf("item 1 is %v, want the hook's own task", tasks[1])
	}
	select {
	case err := <-late:
		if err == nil || !strings.Contains(err.Error(), "after its item's SubmitMany returned") {
			t.Errorf("the late next returned %v, want the batch-ended error", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the late next is still waiting a minute after SubmitMany returned")
	}
	if n := countTasks(t, c); n != 2 {
		t.Errorf("%d tasks written, want 2 (a and b)", n)
	}
}
