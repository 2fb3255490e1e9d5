package badinput

import (
	"context"
	"errors"
	"fmt"
	"math"

	cairnq "github.com/cairnq/cairnq-go"
)

// submitMany is a row calling SubmitMany with items, whose first item
// replaces the queued witness: refused up front, the batch must leave it
// queued.
func submitMany(items ...cairnq.SubmitItem) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) {
		all := append([]cairnq.SubmitItem{{Name: taskName, Options: cairnq.SubmitOptions{Key: "witness-queued", Conflict: cairnq.ConflictReplace}}}, items...)
		tasks, err := e.C.SubmitMany(ctx, all)
		var ie *cairnq.SubmitItemError
		if err != nil && !errors.As(err, &ie) {
			var ae *cairnq.ArgumentError
			if !errors.As(err, &ae) || ae.Arg != "batch" {
				return Outcome{}, fmt.Errorf("the refusal %w is not a *SubmitItemError", err)
			}
		}
		if ie != nil && ie.Index != len(all)-1 {
			return Outcome{}, fmt.Errorf("the refusal names item %d, want %d: %w", ie.Index, len(all)-1, err)
		}
		if len(tasks) > 0 {
			return Outcome{Task: tasks[len(tasks)-1]}, err
		}
		return Outcome{}, err
	}
}

// submitManyCases are the rows that call SubmitMany: the last item of
// each batch is the bad one.
func submitManyCases() []Case {
	ok := cairnq.SubmitItem{Name: taskName, Payload: map[string]any{"ok": true}}
	tooMany := make([]cairnq.SubmitItem, cairnq.MaxSubmitMany)
	for i := range tooMany {
		tooMany[i] = ok
	}
	return []Case{
		{Name: "submit many/item name empty", Want: Argument, Arg: "name", Call: submitMany(ok, cairnq.SubmitItem{})},
		{Name: "submit many/item key NUL", Want: Argument, Arg: "key",
			Call: submitMany(ok, cairnq.SubmitItem{Name: taskName, Options: cairnq.SubmitOptions{Key: "k\x00"}})},
		{Name: "submit many/item priority past int32", Want: Argument, Arg: "priority",
			Call: submitMany(cairnq.SubmitItem{Name: taskName, Options: cairnq.SubmitOptions{Priority: wide(math.MaxInt32 + 1)}})},
		{Name: "submit many/item payload NaN", Want: Serialization, Field: "payload",
			Call: submitMany(ok, cairnq.SubmitItem{Name: taskName, Payload: math.NaN()})},
		{Name: "submit many/batch past the limit", Want: Argument, Arg: "batch", Call: submitMany(tooMany...)},
		{Name: "submit many/nil context", Want: Argument, Arg: "context",
			Call: call(func(ctx context.Context, e *Env) error {
				var nilCtx context.Context
				_, err := e.C.SubmitMany(nilCtx, []cairnq.SubmitItem{ok})
				return err
			})},
		{Name: "submit many/TaskDef one key for many", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := cairnq.Define[int, int](taskName).SubmitMany(ctx, e.C, []int{1, 2}, &cairnq.SubmitOptions{Key: "k"})
				return err
			})},
		// The first item replaces the queued witness: two tasks added, and
		// the witness canceled, which the runner's snapshot would report;
		// so the accepted row replaces the canceled witness instead.
		{Name: "submit many/accepted", Want: Accepted, Adds: 2,
			Call: func(ctx context.Context, e *Env) (Outcome, error) {
				tasks, err := e.C.SubmitMany(ctx, []cairnq.SubmitItem{
					{Name: taskName, Options: cairnq.SubmitOptions{Key: "witness-canceled"}}, ok,
				})
				if err != nil {
					return Outcome{}, err
				}
				return Outcome{Task: tasks[1], Sent: ok.Payload}, nil
			}},
	}
}
