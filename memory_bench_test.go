package cairnq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Memory that a process keeps must follow the work in flight, not what it
// has done (issue 16). The resident-memory figures themselves come from
// bench/cmd/memcairnq; this test guards the piece that would otherwise
// grow with every wait ever made: the hub's settlement subscriptions.
//
// Many concurrent waits end in each of the ways a wait ends (the task
// settles, the wait times out, the caller's context ends), and afterwards
// the hub holds no subscription for any of them.
func TestWaitsLeaveNoSubscriptions(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	st := cairnq.StoreOf(c)
	ctx := context.Background()
	const per = 100 // waits ending each way
	ids := make([]string, 3*per)
	for i := range ids {
		task, err := c.Submit(ctx, "job", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	settled, timedOut, canceled := ids[:per], ids[per:2*per], ids[2*per:]

	// Polls of a minute: only the settlement, the deadline or the context
	// can end these waits.
	slow := &cairnq.WaitOptions{Timeout: 5 * time.Minute, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	short := &cairnq.WaitOptions{Timeout: 300 * time.Millisecond, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wait := func(ctx context.Context, id string, opts *cairnq.WaitOptions, check func(*cairnq.Task, error) bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := c.Wait(ctx, id, opts); !check(got, err) {
				t.Errorf("wait on %s: %+v, %v", id, got, err)
			}
		}()
	}
	for _, id := range settled {
		wait(ctx, id, slow, func(got *cairnq.Task, err error) bool {
			return err == nil && got.Status == cairnq.StatusSucceeded
		})
	}
	for _, id := range canceled {
		wait(cctx, id, slow, func(_ *cairnq.Task, err error) bool { return errors.Is(err, context.Canceled) })
	}

	// Settle and cancel once every slow wait has subscribed, with the
	// short ones running too.
	for cairnq.DoneWaiters(c) < 2*per {
		time.Sleep(time.Millisecond)
	}
	for _, id := range timedOut {
		wait(ctx, id, short, func(_ *cairnq.Task, err error) bool {
			var te *cairnq.TaskTimeoutError
			return errors.As(err, &te)
		})
	}
	claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	isSettled := map[string]bool{}
	for _, id := range settled {
		isSettled[id] = true
	}
	for _, task := range claimed {
		if isSettled[task.ID] {
			if _, err := st.Complete(ctx, task.ID, "w", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	cancel()
	wg.Wait()
	if n := cairnq.DoneWaiters(c); n != 0 {
		t.Errorf("%d settlement subscriptions left after %d waits ended", n, len(ids))
	}
}
