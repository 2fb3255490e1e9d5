package cairnq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// serveOnce claims one task as worker "w" and settles it with settle.
func serveOnce(t *testing.T, st *engine.Store, settle func(*cairnqtype.Task) error) {
	t.Helper()
	ctx := context.Background()
	for {
		got, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"})
		if err != nil {
			t.Error(err)
			return
		}
		if len(got) == 1 {
			if err := settle(got[0]); err != nil {
				t.Error(err)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCallOutcomes(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	st := cairnq.StoreOf(c)
	ctx := context.Background()

	go serveOnce(t, st, func(task *cairnqtype.Task) error {
		_, err := st.Complete(ctx, task.ID, "w", map[string]string{"echo": string(task.Payload)})
		return err
	})
	done, err := c.Call(ctx, "echo", map[string]int{"n": 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]string
	if err := done.DecodeResult(&res); err != nil || res["echo"] != `{"n":7}` {
		t.Errorf("result %s (%v)", done.Result, err)
	}

	go serveOnce(t, st, func(task *cairnqtype.Task) error {
		_, err := st.Fail(ctx, task.ID, "w", cairnqtype.ErrorEnvelope{Type: "Bad", Code: "bad", Message: "no", Details: map[string]any{"why": "x"}}, false, 0)
		return err
	})
	_, err = c.Call(ctx, "echo", nil, nil)
	var tf *cairnq.TaskFailedError
	if !errors.As(err, &tf) || tf.Envelope.Code != "bad" || tf.Envelope.Details["why"] != "x" || tf.TaskID() == "" {
		t.Errorf("failed call: %v", err)
	}

	go serveOnce(t, st, func(task *cairnqtype.Task) error {
		if _, err := c.Cancel(ctx, task.ID); err != nil {
			return err
		}
		_, err := st.Complete(ctx, task.ID, "w", "ignored")
		return err
	})
	_, err = c.Call(ctx, "echo", nil, nil)
	if !errors.Is(err, cairnq.ErrTaskCanceled) {
		t.Errorf("canceled call: %v", err)
	}
}

func TestWaitTimeoutKeepsTaskAndSaysWhy(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	task, err := c.Submit(ctx, "nobody-serves-this", nil, &cairnq.SubmitOptions{Queue: "lonely"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait(ctx, task.ID, &cairnq.WaitOptions{Timeout: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	var te *cairnq.TaskTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("wait: %v, want TaskTimeoutError", err)
	}
	if te.TaskID() != task.ID || te.Task == nil || te.Task.Status != cairnq.StatusQueued {
		t.Errorf("timeout error carries %q / %+v", te.TaskID(), te.Task)
	}
	if msg := err.Error(); !strings.Contains(msg, "never claimed") || !strings.Contains(msg, "lonely") {
		t.Errorf("message does not say why: %s", msg)
	}
	if got, err := c.GetStatus(ctx, task.ID); err != nil || got.Status != cairnq.StatusQueued {
		t.Errorf("after the timeout the task is %v (%v), want still queued", got, err)
	}

	_, err = c.WaitByKey(ctx, "no-such-key", &cairnq.WaitOptions{Timeout: 20 * time.Millisecond})
	if !errors.As(err, &te) || te.Key != "no-such-key" || te.ID != "no-such-key" || te.Task != nil {
		t.Errorf("WaitByKey on nothing: %v", err)
	}
}

// A settlement in this process wakes the waiter at once: with a poll
// interval of a minute, only the in-process wakeup can end this wait.
func TestWaitWokenBySettlementInProcess(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	st := cairnq.StoreOf(c)
	ctx := context.Background()
	task, err := c.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	slow := &cairnq.WaitOptions{Timeout: 5 * time.Minute, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	waited := make(chan *cairnq.Task, 2)
	go func() {
		got, err := c.Wait(ctx, task.ID, slow)
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()
	go func() {
		got, err := c.WaitByKey(ctx, "k1", slow)
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()
	// Settle only once both waiters have read the running status.
	for cairnq.DoneWaiters(c) < 2 {
		time.Sleep(time.Millisecond)
	}
	if _, err := st.Complete(ctx, task.ID, "w", 42); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got := <-waited
		if got == nil || got.Status != cairnq.StatusSucceeded || string(got.Result) != "42" {
			t.Errorf("waiter got %+v", got)
		}
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	task, err := c.Submit(context.Background(), "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx, task.ID, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("wait with a canceled context: %v", err)
	}
}

// Wait returns a task that failed or was canceled as it is, with a nil
// error: the outcome is the task's status. Call turns it into an error.
func TestWaitReturnsFailedAndCanceledTasksWithoutAnError(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	st := cairnq.StoreOf(c)
	ctx := context.Background()
	failed, err := c.Submit(ctx, "job", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"}); err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := st.Fail(ctx, failed.ID, "w", cairnqtype.ErrorEnvelope{Type: "E", Code: "boom", Message: "boom"}, false, 0); err != nil {
		t.Fatal(err)
	}
	canceled, err := c.Submit(ctx, "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, canceled.ID); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		id     string
		status cairnq.Status
	}{{failed.ID, cairnq.StatusFailed}, {canceled.ID, cairnq.StatusCanceled}} {
		got, err := c.Wait(ctx, w.id, nil)
		if err != nil || got == nil || got.Status != w.status {
			t.Errorf("Wait on a %s task = %+v, %v; want the task and a nil error", w.status, got, err)
		}
	}
}

// A wait on a workflow's record that times out names the steps that wait
// and on what, not the record's own unbounded attempts.
func TestWaitOnStuckWorkflowNamesItsSteps(t *testing.T) {
	c := openTemp(t, nil)
	rec, err := c.SubmitWorkflow(context.Background(), []cairnq.WorkflowStep{
		{Step: "charge", Task: "wf.charge"},
		{Step: "ship", Task: "wf.ship", After: []string{"charge"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait(context.Background(), rec.ID, &cairnq.WaitOptions{Timeout: 50 * time.Millisecond})
	var te *cairnq.TaskTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Wait: %v, want a *TaskTimeoutError", err)
	}
	msg := err.Error()
	for _, want := range []string{`step "charge" not claimed yet: is a worker with a handler for "wf.charge"`, `step "ship" waits for charge`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the timeout says %q, lacking %q", msg, want)
		}
	}
	if strings.Contains(msg, "2147483647") {
		t.Errorf("the timeout shows the record's attempts: %q", msg)
	}
}
