package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// parked checks that task id is parked: queued, due after the moment,
// its attempt given back, no worker and no lease.
func parked(t *testing.T, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	got, err := c.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cairnq.StatusQueued || got.Attempt != 0 || got.WorkerID != "" || !got.LeaseUntil.IsZero() || !got.RunAt.After(time.Now()) {
		t.Fatalf("a parked task: status %s, attempt %d, worker %q, lease %v, due %v; want queued, 0, none, none, later",
			got.Status, got.Attempt, got.WorkerID, got.LeaseUntil, got.RunAt)
	}
	return got
}

// A durable sleep parks its task, giving the slot, the lease and the
// attempt back, and the next attempt goes on after it with the steps
// before it skipped.
func TestDurableSleepParksAndResumes(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		var before, after atomic.Int32
		var suspended atomic.Value
		w := newWorker(t, c, nil)
		w.Handle("nap", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if _, err := cairnq.Once(ctx, tc, "before", func(context.Context) (int, error) { return int(before.Add(1)), nil }); err != nil {
				return nil, err
			}
			if err := cairnq.Sleep(ctx, tc, "nap", 300*time.Millisecond); err != nil {
				suspended.Store(err)
				return nil, err
			}
			return cairnq.Once(ctx, tc, "after", func(context.Context) (int, error) { return int(after.Add(1)), nil })
		}, nil)
		task, err := c.Submit(t.Context(), "nap", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ran, err := w.WorkOne(t.Context()); err != nil || len(ran) != 1 {
			t.Fatalf("WorkOne = %v, %v", ran, err)
		}
		err, _ = suspended.Load().(error)
		var se *cairnq.SuspendedError
		if !errors.As(err, &se) || !errors.Is(err, cairnq.ErrSuspended) || se.TaskID != task.ID || se.Event != "" {
			t.Fatalf("Sleep returned %v, want a *SuspendedError for the task", err)
		}
		p := parked(t, c, task.ID)
		if p.RunAt.After(se.Until.Add(time.Second)) {
			t.Fatalf("due %v, want by the sleep's end %v", p.RunAt, se.Until)
		}
		rec, err := cairnq.DurableOf(p)
		if err != nil || len(rec.Steps) != 2 || rec.Steps[0].Name != "before" || string(rec.Steps[0].Output) != "1" ||
			rec.Parked == nil || rec.Parked.Name != "nap" || rec.Parked.Kind != "sleep" || !rec.Parked.Until.Equal(se.Until) {
			t.Fatalf("DurableOf a sleeping task = %+v, %v; want its step, and parked in nap until %v", rec, err, se.Until)
		}
		done := workUntil(t, c, w, task.ID)
		if done.Status != cairnq.StatusSucceeded || string(done.Result) != "1" || before.Load() != 1 || after.Load() != 1 {
			t.Fatalf("after the sleep: %s, result %s, before ran %d times, after %d; want succeeded, 1, 1, 1",
				done.Status, done.Result, before.Load(), after.Load())
		}
		if done.Attempt != 1 {
			t.Fatalf("attempt %d after a sleep, want 1: a sleep spends none", done.Attempt)
		}
	})
}

// A cancel of a sleeping task ends it at once, as of any queued task.
func TestDurableSleepEndsOnCancel(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		w := newWorker(t, c, nil)
		w.Handle("long-nap", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, cairnq.Sleep(ctx, tc, "nap", time.Hour)
		}, nil)
		task, err := c.Submit(t.Context(), "long-nap", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WorkOne(t.Context()); err != nil {
			t.Fatal(err)
		}
		parked(t, c, task.ID)
		got, err := c.Cancel(t.Context(), task.ID)
		if err != nil || got.Status != cairnq.StatusCanceled {
			t.Fatalf("Cancel of a sleeping task = %+v, %v; want canceled", got, err)
		}
	})
}

type approval struct {
	By string `json:"by"`
}

// An event wakes the task waiting for it at once, and is returned typed;
// one sent before the wait is there when the wait begins; a wait that
// runs out returns TimedOut, and an event after it is refused; an event
// counts once.
func TestDurableEventsBeforeAfterAndTimeout(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		w := newWorker(t, c, nil)
		w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var timeout time.Duration
			if err := tc.Decode(&timeout); err != nil {
				return nil, err
			}
			ev, err := cairnq.WaitEvent[approval](ctx, tc, "approval", timeout)
			if err != nil {
				return nil, err
			}
			if ev.TimedOut {
				return "timed out", nil
			}
			return "approved by " + ev.Payload.By, nil
		}, nil)
		submit := func(timeout time.Duration, key string) *cairnq.Task {
			t.Helper()
			task, err := c.Submit(ctx, "approve", timeout, &cairnq.SubmitOptions{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		result := func(task *cairnq.Task) string {
			t.Helper()
			var s string
			_ = json.Unmarshal(task.Result, &s)
			return s
		}

		// After the wait began: the task parks until the event wakes it.
		after := submit(time.Hour, "after")
		if _, err := w.WorkOne(ctx); err != nil {
			t.Fatal(err)
		}
		parked(t, c, after.ID)
		if err := c.SendEventByKey(ctx, "after", "approval", approval{By: "ann"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Get(ctx, after.ID); got.RunAt.After(time.Now()) {
			t.Fatalf("due %v after its event, want now", got.RunAt)
		}
		if got := workUntil(t, c, w, after.ID); got.Status != cairnq.StatusSucceeded || result(got) != "approved by ann" {
			t.Fatalf("woken by its event: %s %s", got.Status, got.Result)
		}
		var refused *cairnq.EventRefusedError
		if err := c.SendEvent(ctx, after.ID, "approval", approval{By: "bob"}); !errors.As(err, &refused) || refused.Status != cairnq.StatusSucceeded {
			t.Fatalf("an event to an ended task = %v, want an *EventRefusedError naming its status", err)
		}

		// Before the wait: the event is there when it begins.
		before := submit(time.Hour, "before")
		if err := c.SendEvent(ctx, before.ID, "approval", approval{By: "cy"}); err != nil {
			t.Fatal(err)
		}
		err := c.SendEvent(ctx, before.ID, "approval", approval{By: "dee"})
		if !errors.As(err, &refused) || !refused.Delivered || refused.TimedOut || !errors.Is(err, cairnq.ErrEventRefused) {
			t.Fatalf("the same event twice = %v, want refused as delivered", err)
		}
		if ran, err := w.WorkOne(ctx); err != nil || len(ran) != 1 {
			t.Fatalf("WorkOne = %v, %v", ran, err)
		}
		if got, _ := c.Get(ctx, before.ID); got.Status != cairnq.StatusSucceeded || result(got) != "approved by cy" {
			t.Fatalf("an event sent before the wait: %s %s, want the first one's", got.Status, got.Result)
		}

		// A timeout, then an event too late.
		late := submit(200*time.Millisecond, "late")
		if _, err := w.WorkOne(ctx); err != nil {
			t.Fatal(err)
		}
		parked(t, c, late.ID)
		if got := workUntil(t, c, w, late.ID); got.Status != cairnq.StatusSucceeded || result(got) != "timed out" {
			t.Fatalf("a wait that ran out: %s %s", got.Status, got.Result)
		}
		err = c.SendEvent(ctx, late.ID, "approval", approval{By: "eve"})
		if !errors.As(err, &refused) {
			t.Fatalf("an event after the wait ran out = %v, want refused", err)
		}

		// Input the store refuses, and nothing written for it.
		if err := c.SendEvent(ctx, "task_missing", "approval", nil); !errors.Is(err, cairnq.ErrNotFound) {
			t.Fatalf("an event to no task = %v, want ErrNotFound", err)
		}
		if err := c.SendEventByKey(ctx, "no-such-key", "approval", nil); !errors.Is(err, cairnq.ErrNotFound) {
			t.Fatalf("an event to no key = %v, want ErrNotFound", err)
		}
		other := submit(time.Hour, "other")
		for _, name := range []string{"", `say "hi"`, "a\\b", "tab\there"} {
			if err := c.SendEvent(ctx, other.ID, name, nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
				t.Errorf("event name %q = %v, want ErrInvalidArgument", name, err)
			}
		}
		if err := c.SendEvent(ctx, other.ID, "approval", func() {}); !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("an event whose payload does not encode = %v, want ErrInvalidArgument", err)
		}
		if got, _ := c.Get(ctx, other.ID); string(got.Metadata) != "{}" {
			t.Errorf("metadata after refused events = %s, want it untouched", got.Metadata)
		}
	})
}

// An event sent in the application's transaction counts, and wakes its
// task, only once the transaction commits.
func TestDurableEventInTheApplicationsTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, ex := openPostgresApp(t, nil)
	w := newWorker(t, c, nil)
	w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ev, err := cairnq.WaitEvent[approval](ctx, tc, "approval", time.Hour)
		return ev.Payload.By, err
	}, nil)
	task, err := c.Submit(ctx, "approve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WorkOne(ctx); err != nil {
		t.Fatal(err)
	}
	parked(t, c, task.ID)
	rollback := errors.New("roll back")
	err = ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		if err := c.SendEventTx(ctx, sess, task.ID, "approval", approval{By: "rolled back"}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	parked(t, c, task.ID)
	err = ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		return c.SendEventTx(ctx, sess, task.ID, "approval", approval{By: "committed"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := workUntil(t, c, w, task.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"committed"` {
		t.Fatalf("after a committed event: %s %s", got.Status, got.Result)
	}
	sq := openTemp(t, nil)
	err = ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
		return sq.SendEventTx(ctx, sess, task.ID, "approval", nil)
	})
	if !errors.Is(err, cairnq.ErrUnsupported) {
		t.Fatalf("SendEventTx on SQLite = %v, want ErrUnsupported", err)
	}
}

// Sleeping and waiting tasks hold no worker slot and no lease: 1,000 of
// them parked by a worker of 4 slots, which then runs a plain task.
func TestDurableParkedTasksHoldNoSlot(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		const n = 1000
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4})
		w.Handle("park", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var i int
			if err := tc.Decode(&i); err != nil {
				return nil, err
			}
			if i%2 == 0 {
				return nil, cairnq.Sleep(ctx, tc, "nap", time.Hour)
			}
			_, err := cairnq.WaitEvent[any](ctx, tc, fmt.Sprint("go-", i), time.Hour)
			return nil, err
		}, nil)
		w.Handle("plain", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "ran", nil }, nil)
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: "park", Payload: i}
		}
		if _, err := c.SubmitMany(ctx, items); err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, w)
		defer stop()
		waitLong(t, "1,000 tasks to park", func() bool {
			tasks, err := c.List(ctx, &cairnq.ListOptions{Name: "park", Status: cairnq.StatusQueued, Limit: n})
			if err != nil {
				t.Fatal(err)
			}
			parkedCount := 0
			for _, tk := range tasks {
				if tk.Attempt == 0 && tk.RunAt.After(time.Now()) && tk.WorkerID == "" && tk.LeaseUntil.IsZero() {
					parkedCount++
				}
			}
			return parkedCount == n
		})
		plain, err := c.Submit(ctx, "plain", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := waitTask(t, c, plain.ID); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("a plain task beside 1,000 parked ones: %s", got.Status)
		}
		counts, err := c.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var running int
		for _, sc := range counts {
			running += sc.Running
		}
		if running != 0 {
			t.Fatalf("%d tasks running, want none: parked tasks hold no lease", running)
		}
	})
}

// An event sent by another process wakes a worker that polls hourly:
// Postgres's LISTEN, or SQLite's watch on the database file, brings it.
func TestDurableEventWakesAnotherProcess(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.db")
		eventWakes(t, openTemp2(t, path), openTemp2(t, path))
	})
	t.Run("postgres", func(t *testing.T) {
		c, dsn := openPostgresDSN(t, nil)
		other, _ := openCounted(t.Context(), t, dsn)
		eventWakes(t, c, other)
	})
}

func eventWakes(t *testing.T, c, sender *cairnq.Client) {
	ctx := t.Context()
	w := newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Hour})
	w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ev, err := cairnq.WaitEvent[approval](ctx, tc, "approval", 24*time.Hour)
		return ev.Payload.By, err
	}, nil)
	task, err := c.Submit(ctx, "approve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer startWorker(t, w)()
	waitFor(t, "the task to park", func() bool {
		got, err := c.Get(ctx, task.ID)
		return err == nil && got.Status == cairnq.StatusQueued && got.RunAt.After(time.Now().Add(time.Hour))
	})
	if err := sender.SendEvent(ctx, task.ID, "approval", approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"ops"` {
		t.Fatalf("woken by another process's event: %s %s", got.Status, got.Result)
	}
}

// An event that arrives while the attempt runs, after its claim read the
// row, keeps the wait from parking: the wait returns it at once.
func TestDurableEventDuringTheAttempt(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		w := newWorker(t, c, nil)
		w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if err := c.SendEvent(ctx, tc.ID(), "approval", approval{By: "in time"}); err != nil {
				return nil, err
			}
			ev, err := cairnq.WaitEvent[approval](ctx, tc, "approval", time.Hour)
			return ev.Payload.By, err
		}, nil)
		task, err := c.Submit(t.Context(), "approve", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ran, err := w.WorkOne(t.Context()); err != nil || len(ran) != 1 || ran[0].Status != cairnq.StatusSucceeded || string(ran[0].Result) != `"in time"` {
			t.Fatalf("WorkOne = %+v, %v; want the event returned without parking", ran, err)
		}
		if got, _ := c.Get(t.Context(), task.ID); got.Attempt != 1 {
			t.Fatalf("attempt %d, want 1", got.Attempt)
		}
	})
}

// A workflow's step may sleep: the workflow goes on once the step ends.
func TestDurableSleepInAWorkflowStep(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		w := newWorker(t, c, nil)
		w.Handle("wf.nap", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if err := cairnq.Sleep(ctx, tc, "nap", 200*time.Millisecond); err != nil {
				return nil, err
			}
			return "rested", nil
		}, nil)
		w.Handle("wf.after", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "after", nil }, nil)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "nap", Task: "wf.nap"}, {Step: "after", Task: "wf.after", After: []string{"nap"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer startWorker(t, w)()
		if got := waitTask(t, c, rec.ID); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("a workflow whose step slept: %s", got.Status)
		}
	})
}

// A sleep outlives the process that began it: a client and worker park
// the task and close; another opened on the same database runs it on
// after the sleep, its step before the sleep not run again.
func TestDurableSleepAcrossARestart(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.db")
		sleepAcrossRestart(t, func() *cairnq.Client { return openTemp2(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		_, dsn := openPostgresDSN(t, nil)
		sleepAcrossRestart(t, func() *cairnq.Client { c, _ := openCounted(t.Context(), t, dsn); return c })
	})
}

func sleepAcrossRestart(t *testing.T, open func() *cairnq.Client) {
	ctx := t.Context()
	var charged atomic.Int32
	handler := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if _, err := cairnq.Once(ctx, tc, "charge", func(context.Context) (int32, error) { return charged.Add(1), nil }); err != nil {
			return nil, err
		}
		if err := cairnq.Sleep(ctx, tc, "nap", 300*time.Millisecond); err != nil {
			return nil, err
		}
		return "shipped", nil
	}
	first := open()
	w := newWorker(t, first, nil)
	w.Handle("restart.nap", handler, nil)
	task, err := first.Submit(ctx, "restart.nap", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WorkOne(ctx); err != nil {
		t.Fatal(err)
	}
	parked(t, first, task.ID)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open()
	w2 := newWorker(t, second, nil)
	w2.Handle("restart.nap", handler, nil)
	done := workUntil(t, second, w2, task.ID)
	if done.Status != cairnq.StatusSucceeded || string(done.Result) != `"shipped"` || charged.Load() != 1 {
		t.Fatalf("after the restart: %s %s, charged %d times; want succeeded, shipped, once", done.Status, done.Result, charged.Load())
	}
}

// An event sent after the end of the task's wait for it, before a worker
// wrote the timeout's mark, is refused to its sender, and the wait times
// out.
func TestDurableLateEventRefused(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		w := newWorker(t, c, nil)
		w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			ev, err := cairnq.WaitEvent[string](ctx, tc, "approval", 200*time.Millisecond)
			if err != nil || ev.TimedOut {
				return "timed out", err
			}
			return ev.Payload, nil
		}, nil)
		task, err := c.Submit(ctx, "approve", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WorkOne(ctx); err != nil {
			t.Fatal(err)
		}
		rec, err := cairnq.DurableOf(parked(t, c, task.ID))
		if err != nil || rec.Parked == nil {
			t.Fatalf("DurableOf = %+v, %v", rec, err)
		}
		waitFor(t, "the wait's end to pass", func() bool { return time.Now().After(rec.Parked.Until.Add(5 * time.Millisecond)) })
		err = c.SendEvent(ctx, task.ID, "approval", "too late")
		var refused *cairnq.EventRefusedError
		if !errors.As(err, &refused) || !refused.TimedOut || refused.Delivered {
			t.Fatalf("an event after its wait's end = %v, want refused as timed out", err)
		}
		if got := workUntil(t, c, w, task.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"timed out"` {
			t.Fatalf("the wait: %s %s, want timed out", got.Status, got.Result)
		}
	})
}

// Input a durable step refuses is refused before anything runs or is
// written: a name the record cannot hold, a park past 100 years; a cancel
// requested while the attempt ran wins over a sleep; a record this SDK
// cannot read is a *DurableFormatError under this package's name.
func TestDurableRefusals(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		var ran atomic.Int32
		w := newWorker(t, c, nil)
		w.Handle("refusals", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			long := strings.Repeat("x", 256)
			_, e1 := cairnq.Once(ctx, tc, long, func(context.Context) (int, error) { ran.Add(1); return 0, nil })
			_, e2 := cairnq.Once(ctx, tc, "bad\x00name", func(context.Context) (int, error) { ran.Add(1); return 0, nil })
			e3 := cairnq.SleepUntil(ctx, tc, "forever", time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC))
			e4 := cairnq.Sleep(ctx, tc, "too-long", 200*365*24*time.Hour)
			_, e5 := cairnq.WaitEvent[int](ctx, tc, "too-long", 200*365*24*time.Hour)
			for i, err := range []error{e1, e2, e3, e4, e5} {
				if !errors.Is(err, cairnq.ErrInvalidArgument) {
					return nil, cairnq.Permanent(fmt.Errorf("refusal %d: %v, want ErrInvalidArgument", i+1, err))
				}
			}
			return "refused", nil
		}, nil)
		task, err := c.Submit(ctx, "refusals", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := workUntil(t, c, w, task.ID)
		if got.Status != cairnq.StatusSucceeded || ran.Load() != 0 {
			t.Fatalf("refusals: %s %+v, a step ran %d times; want refused before running", got.Status, got.Error, ran.Load())
		}
		if rec, err := cairnq.DurableOf(got); err != nil || len(rec.Steps) != 0 {
			t.Fatalf("refused steps left a record: %+v, %v", rec, err)
		}

		w.Handle("cancel-then-sleep", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if _, err := c.Cancel(ctx, tc.ID()); err != nil {
				return nil, err
			}
			err := cairnq.Sleep(ctx, tc, "nap", time.Hour)
			if !errors.Is(err, cairnq.ErrTaskCanceled) || errors.Is(err, cairnq.ErrSuspended) {
				t.Errorf("a sleep after a cancel request = %v, want ErrTaskCanceled", err)
			}
			return nil, err
		}, nil)
		canceled, err := c.Submit(ctx, "cancel-then-sleep", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := workUntil(t, c, w, canceled.ID); got.Status != cairnq.StatusCanceled {
			t.Fatalf("a sleep after a cancel request: %s, want canceled", got.Status)
		}

		odd, err := c.Submit(ctx, "refusals", nil, &cairnq.SubmitOptions{Metadata: json.RawMessage(`{"cairnq_durable":{"v":{"card":"4111"}}}`)})
		if err != nil {
			t.Fatal(err)
		}
		err = c.SendEvent(ctx, odd.ID, "x", nil)
		var fe *cairnq.DurableFormatError
		if !errors.As(err, &fe) || fe.TaskID != odd.ID || strings.Contains(err.Error(), "4111") {
			t.Fatalf("an event to a task whose record cannot be read = %v, want a *cairnq.DurableFormatError that quotes no data", err)
		}
		if _, err := cairnq.DurableOf(odd); !errors.As(err, &fe) {
			t.Fatalf("DurableOf a record it cannot read = %v, want a *cairnq.DurableFormatError", err)
		}
	})
}

// waitLong is waitFor with two minutes' patience, for work that a loaded
// machine under -race slows past waitFor's 15 s.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Events may not take a task's metadata past MaxValueBytes: the one that
// would is refused, and the task's steps still record.
func TestDurableEventsBoundedByTheMetadataLimit(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		ctx := t.Context()
		task, err := c.Submit(ctx, "bounded", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 9<<20)
		if err := c.SendEvent(ctx, task.ID, "first", big); err != nil {
			t.Fatal(err)
		}
		err = c.SendEvent(ctx, task.ID, "second", big)
		if !errors.Is(err, cairnq.ErrValueTooLarge) || !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Fatalf("an event past MaxValueBytes = %v, want ErrValueTooLarge", err)
		}
		got, err := c.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := cairnq.DurableOf(got); err != nil || len(rec.Events) != 1 {
			t.Fatalf("events after a refused one: %v, %v; want the first alone", len(rec.Events), err)
		}
	})
}
