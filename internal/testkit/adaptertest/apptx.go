package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// AppTx is one of the application's own transactions, as its ORM hands it
// out, seen through the adapter's typed helpers.
type AppTx struct {
	// Submit submits a task with the adapter's typed SubmitTx on this
	// transaction.
	Submit func(ctx context.Context, kind string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error)
	// SubmitMany submits a batch with the adapter's typed SubmitManyTx on
	// this transaction.
	SubmitMany func(ctx context.Context, items []cairnq.SubmitItem) ([]*cairnq.Task, error)
	// Record writes the application's own row for taskID in this
	// transaction, so the test can tell it commits and rolls back with the
	// task.
	Record func(ctx context.Context, taskID string) error
}

// SubmitTxInAppTransaction checks that a task submitted in the
// application's own transaction is invisible until the commit and gone
// after a rollback, so a task never runs for a row that was not written.
// inTx runs fn in a new application transaction, committing unless fn
// fails. It returns the committed task, keyed "k", whose row the caller
// checks in its own terms.
func SubmitTxInAppTransaction(t *testing.T, c *cairnq.Client, inTx func(ctx context.Context, fn func(context.Context, AppTx) error) error) *cairnq.Task {
	t.Helper()
	ctx := Ctx(t)
	rollback := errors.New("roll back")
	var gone *cairnq.Task
	var goneBatch []*cairnq.Task
	err := inTx(ctx, func(ctx context.Context, tx AppTx) error {
		if err := tx.Record(ctx, "pending"); err != nil {
			return err
		}
		var err error
		if gone, err = tx.Submit(ctx, "render", map[string]int{"n": 1}, nil); err != nil {
			return err
		}
		if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("uncommitted task visible outside the transaction: %v", err)
		}
		batch, err := tx.SubmitMany(ctx, []cairnq.SubmitItem{{Name: "render"}, {Name: "render", Options: cairnq.SubmitOptions{Key: "batch-k"}}})
		if err != nil {
			return err
		}
		goneBatch = batch
		return rollback
	})
	if err != rollback {
		t.Fatalf("transaction: %v, want its own error", err)
	}
	for _, task := range append(goneBatch, gone) {
		if _, err := c.Get(ctx, task.ID); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("task of a rolled-back transaction: %v", err)
		}
	}

	var kept *cairnq.Task
	var keptBatch []*cairnq.Task
	err = inTx(ctx, func(ctx context.Context, tx AppTx) error {
		var err error
		if kept, err = tx.Submit(ctx, "render", nil, &cairnq.SubmitOptions{Key: "k"}); err != nil {
			return err
		}
		if _, err := c.GetByKey(ctx, "k"); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("uncommitted keyed task visible: %v", err)
		}
		if keptBatch, err = tx.SubmitMany(ctx, []cairnq.SubmitItem{{Name: "render"}, {Name: "render", Options: cairnq.SubmitOptions{Key: "batch-k"}}}); err != nil {
			return err
		}
		return tx.Record(ctx, kept.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range keptBatch {
		if got, err := c.Get(ctx, task.ID); err != nil || got.Status != cairnq.StatusQueued {
			t.Errorf("task of a committed batch: %+v %v", got, err)
		}
	}
	if got, err := c.GetByKey(ctx, "k"); err != nil || got.ID != kept.ID || got.Status != cairnq.StatusQueued {
		t.Errorf("committed task: %+v %v", got, err)
	}
	return kept
}

// Settlers are an adapter's typed ways of settling a task inside an
// application transaction, for [WorkerSettles].
type Settlers struct {
	// Steal makes the task look recovered by another worker, "thief",
	// through the application's own handle, so the settlement that follows
	// has lost its lease.
	Steal func(ctx context.Context, taskID string) error
	// SucceedIn settles through the adapter's typed SucceedIn, whose fn
	// writes the task's application row (body "pages") and returns
	// {"id": <the row's id>} as the result.
	SucceedIn func(ctx context.Context, tc *cairnq.TaskContext) error
	// SucceedTx writes the task's application row (body "own") in an
	// application transaction and settles in it with SucceedTx.
	SucceedTx func(ctx context.Context, tc *cairnq.TaskContext) error
}

// Settled names the tasks [WorkerSettles] ran, for the caller to check
// its application rows against.
type Settled struct {
	// OK was settled with SucceedIn; its row must be there.
	OK string
	// Own was settled with SucceedTx; its row must be there.
	Own string
	// Stolen lost its lease before SucceedIn; its row must not be there.
	Stolen string
	// ResultID is the row id OK's result carries.
	ResultID int64
}

// WorkerSettles runs a worker on c whose handlers settle with s, and
// checks what the client sees: both settled tasks succeeded, and the
// settlement after a lost lease failed with ErrLostLease and left the task
// to the thief, which is what rolls back the handler's row with it.
func WorkerSettles(t *testing.T, c *cairnq.Client, s Settlers) Settled {
	t.Helper()
	ctx := Ctx(t)
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, s.SucceedIn(ctx, tc)
	}, nil)
	lost := make(chan error, 1)
	w.Handle("render-stolen", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if err := s.Steal(ctx, tc.ID()); err != nil {
			return nil, err
		}
		err := s.SucceedIn(ctx, tc)
		lost <- err
		return nil, err
	}, nil)
	w.Handle("render-own-tx", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, s.SucceedTx(ctx, tc)
	}, nil)
	RunWorker(t, w)

	var out Settled
	for kind, id := range map[string]*string{"render": &out.OK, "render-stolen": &out.Stolen, "render-own-tx": &out.Own} {
		task, err := c.Submit(ctx, kind, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		*id = task.ID
	}
	for _, id := range []string{out.OK, out.Own} {
		got, err := c.Wait(ctx, id, &cairnq.WaitOptions{Timeout: WaitTimeout})
		if err != nil || got.Status != cairnq.StatusSucceeded {
			t.Fatalf("task %s: %v %+v", id, err, got)
		}
	}
	if err := <-lost; !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("SucceedIn after losing the lease: %v, want ErrLostLease", err)
	}
	done, err := c.Get(ctx, out.OK)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ ID int64 }
	if err := json.Unmarshal(done.Result, &res); err != nil || res.ID == 0 {
		t.Errorf("result %s does not carry the row id: %v", done.Result, err)
	}
	out.ResultID = res.ID
	if st, _ := c.Get(ctx, out.Stolen); st.Status != cairnq.StatusRunning || st.WorkerID != "thief" {
		t.Errorf("stolen task: %s by %s", st.Status, st.WorkerID)
	}
	return out
}

// ByTaskID indexes the application's model rows by the task each belongs
// to, which is how the settlement tests look them up.
func ByTaskID[R any](rows []R, taskID func(R) string) map[string]R {
	out := make(map[string]R, len(rows))
	for _, r := range rows {
		out[taskID(r)] = r
	}
	return out
}
