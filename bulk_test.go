package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// statusesOf reads each id's status, "gone" for a deleted task.
func statusesOf(t *testing.T, c *cairnq.Client, ids []string) map[cairnq.Status]int {
	t.Helper()
	out := map[cairnq.Status]int{}
	for _, id := range ids {
		got, err := c.Get(context.Background(), id)
		switch {
		case errors.Is(err, cairnq.ErrNotFound):
			out["gone"]++
		case err != nil:
			t.Fatal(err)
		default:
			out[got.Status]++
		}
	}
	return out
}

// Cancel, retry and delete by filter act on exactly the tasks matching
// every field of the filter that their single-task forms would act on,
// over more than one page of ids; a deleted task's key goes with it.
func TestCancelRetryDeleteByFilter(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		submit := func(n int, name, queue string) []string {
			var ids []string
			for i := range n {
				task, err := c.Submit(ctx, name, nil, &cairnq.SubmitOptions{Queue: queue, Key: fmt.Sprintf("%s-%s-%d", queue, name, i)})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, task.ID)
			}
			return ids
		}
		email := submit(1203, "email", "mail") // three pages and a bit
		sms := submit(3, "sms", "mail")
		other := submit(2, "email", "other")

		n, err := c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "mail", Name: "email"})
		if err != nil || n != len(email) {
			t.Fatalf("CancelByFilter = %d, %v; want %d", n, err, len(email))
		}
		if got := statusesOf(t, c, email); got[cairnq.StatusCanceled] != len(email) {
			t.Errorf("the emails on mail after the cancel: %v", got)
		}
		if got := statusesOf(t, c, append(sms, other...)); got[cairnq.StatusQueued] != 5 {
			t.Errorf("tasks the filter did not match after the cancel: %v, want 5 queued", got)
		}
		if n, err := c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "mail", Name: "email"}); err != nil || n != 0 {
			t.Errorf("CancelByFilter again = %d, %v; want 0: nothing left to cancel", n, err)
		}

		// Retry half back: cancel the retried again, so that both statuses
		// are there for the delete.
		if n, err := c.RetryByFilter(ctx, cairnq.TaskFilter{Status: cairnq.StatusCanceled, Name: "email"}, nil); err != nil || n != len(email) {
			t.Fatalf("RetryByFilter = %d, %v; want %d", n, err, len(email))
		}
		if got := statusesOf(t, c, email); got[cairnq.StatusQueued] != len(email) {
			t.Errorf("the emails after the retry: %v", got)
		}
		for _, id := range email[:3] {
			if _, err := c.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		n, err = c.DeleteByFilter(ctx, cairnq.TaskFilter{Queue: "mail", Status: cairnq.StatusCanceled})
		if err != nil || n != 3 {
			t.Fatalf("DeleteByFilter of the canceled = %d, %v; want 3", n, err)
		}
		if got := statusesOf(t, c, email); got["gone"] != 3 || got[cairnq.StatusQueued] != len(email)-3 {
			t.Errorf("the emails after the delete: %v", got)
		}
		if _, err := c.GetByKey(ctx, "mail-email-0"); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("the key of a deleted task: %v, want ErrNotFound", err)
		}
		if task, err := c.GetByKey(ctx, "mail-email-3"); err != nil || task.ID != email[3] {
			t.Errorf("the key of a kept task: %v, %v", task, err)
		}
	})
}

// A bulk action with no filter, or a bad one, is refused and changes
// nothing.
func TestByFilterRefusesBadInput(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		task, err := c.Submit(ctx, "email", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			f   cairnq.TaskFilter
			arg string
		}{
			{cairnq.TaskFilter{}, "filter"},
			{cairnq.TaskFilter{Status: "faild"}, "status"},
			{cairnq.TaskFilter{Queue: "q\x00"}, "queue"},
			{cairnq.TaskFilter{Name: "n\xff"}, "name"},
		} {
			for op, run := range map[string]func() (int, error){
				"cancel": func() (int, error) { return c.CancelByFilter(ctx, tc.f) },
				"retry":  func() (int, error) { return c.RetryByFilter(ctx, tc.f, nil) },
				"delete": func() (int, error) { return c.DeleteByFilter(ctx, tc.f) },
			} {
				n, err := run()
				var ae *cairnq.ArgumentError
				if !errors.As(err, &ae) || ae.Arg != tc.arg || n != 0 {
					t.Errorf("%s by %+v = %d, %v; want an *ArgumentError on %q", op, tc.f, n, err, tc.arg)
				}
			}
		}
		if got, err := c.Get(ctx, task.ID); err != nil || got.Status != cairnq.StatusQueued {
			t.Errorf("the task after the refusals: %v, %v", got, err)
		}
		if _, err := c.Delete(ctx, ""); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("Delete of no id: %v, want an *ArgumentError", err)
		}
	})
}

// Delete leaves what a worker holds and what a live workflow needs, and
// deletes a finished task; a waiter on a deleted task reads ErrNotFound.
func TestDeleteTask(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		held := make(chan *cairnq.Task, 1)
		w := newWorker(t, c, nil)
		w.Handle("hold", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			got, err := c.Delete(ctx, tc.ID())
			if err != nil {
				return nil, err
			}
			held <- got
			return "kept", nil
		}, nil)
		w.Handle("step", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
		running, err := c.Submit(ctx, "hold", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if done := workUntil(t, c, w, running.ID); done.Status != cairnq.StatusSucceeded {
			t.Fatalf("the held task: %s", done.Status)
		}
		if got := <-held; got != nil {
			t.Errorf("Delete of a running task = %+v, want nil: a worker holds it", got)
		}
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "a", Task: "step"}, {Step: "b", Task: "step", After: []string{"a"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := c.List(ctx, &cairnq.ListOptions{RootID: rec.ID})
		if err != nil || len(steps) == 0 {
			t.Fatalf("the workflow's tasks: %d, %v", len(steps), err)
		}
		for _, task := range append(steps, rec) {
			if got, err := c.Delete(ctx, task.ID); err != nil || got != nil {
				t.Errorf("Delete of %s of a live workflow = %v, %v; want nil", task.Name, got, err)
			}
		}
		gone, err := c.Delete(ctx, running.ID)
		if err != nil || gone == nil || gone.ID != running.ID || gone.Status != cairnq.StatusSucceeded {
			t.Fatalf("Delete of a succeeded task = %+v, %v", gone, err)
		}
		if _, err := c.Wait(ctx, running.ID, nil); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("Wait on a deleted task: %v, want ErrNotFound", err)
		}
		if again, err := c.Delete(ctx, running.ID); err != nil || again != nil {
			t.Errorf("Delete again = %v, %v; want nil, nil", again, err)
		}
	})
}

// pageHook runs after the first page of a bulk action's ids is read, as
// if a worker, or an operator, acted between the read and the action.
type pageHook struct {
	executor.Executor
	after func()
	once  sync.Once
}

func (p *pageHook) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	rows, err := p.Executor.Query(ctx, sql, args...)
	if err == nil && strings.Contains(sql, "SELECT id, name FROM cairnq_tasks WHERE id >") {
		p.once.Do(p.after)
	}
	return rows, err
}

// A task that stops matching the filter between the page's read and its
// turn is left: a queued task claimed meanwhile is not canceled by a
// cancel of the queued ones, a failed task retried meanwhile is not
// deleted by a delete of the failed ones.
func TestByFilterLeavesWhatStoppedMatching(t *testing.T) {
	hook := &pageHook{}
	c := openThrough(t, func(ex executor.Executor) executor.Executor {
		hook.Executor = ex
		return hook
	})
	ctx := context.Background()
	task, err := c.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Queue: "bulk", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	hook.after = func() { // a worker claims it
		if got, err := c.Store().Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"bulk"}, WorkerID: "w", Lease: time.Minute}); err != nil || len(got) != 1 {
			t.Errorf("claim: %v, %v", got, err)
		}
	}
	if n, err := c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "bulk", Status: cairnq.StatusQueued}); err != nil || n != 0 {
		t.Errorf("CancelByFilter of the queued = %d, %v; want 0: the task was claimed", n, err)
	}
	if got, _ := c.Get(ctx, task.ID); got.Status != cairnq.StatusRunning || !got.CancelRequestedAt.IsZero() {
		t.Errorf("the claimed task after the cancel: %s, cancel requested %v", got.Status, got.CancelRequestedAt)
	}
	if _, err := c.Store().Fail(ctx, task.ID, "w", cairnqtype.ErrorEnvelope{Message: "boom"}, false, 0); err != nil {
		t.Fatal(err)
	}
	hook.once, hook.after = sync.Once{}, func() { // an operator retries it
		if _, err := c.Retry(ctx, task.ID, nil); err != nil {
			t.Error(err)
		}
	}
	if n, err := c.DeleteByFilter(ctx, cairnq.TaskFilter{Queue: "bulk", Status: cairnq.StatusFailed}); err != nil || n != 0 {
		t.Errorf("DeleteByFilter of the failed = %d, %v; want 0: the task was retried", n, err)
	}
	if got, err := c.Get(ctx, task.ID); err != nil || got.Status != cairnq.StatusQueued {
		t.Errorf("the retried task after the delete: %v, %v", got, err)
	}
	// A running task asked to stop once is not asked, nor counted, again.
	if got, err := c.Store().Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"bulk"}, WorkerID: "w", Lease: time.Minute}); err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	for want := range []int{1, 0} {
		if n, err := c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "bulk"}); err != nil || n != 1-want {
			t.Errorf("CancelByFilter of a running task, time %d = %d, %v; want %d", want+1, n, err, 1-want)
		}
	}
}
