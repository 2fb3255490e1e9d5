package badinput

import (
	"context"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// readCases are the rows that read tasks: Get, GetByKey, GetStatus, List,
// Stats and QueueHeadroom.
func readCases() []Case {
	return []Case{
		{Name: "get/id/empty", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Get(ctx, ""); return err })},
		{Name: "get/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Get(ctx, e.Queued.ID+"\x00"); return err })},
		{Name: "get/context/nil", Want: Argument, Arg: "context",
			Call: call(func(_ context.Context, e *Env) error { _, err := e.C.Get(nilCtx, e.Queued.ID); return err })},
		{Name: "get by key/key/empty", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.GetByKey(ctx, ""); return err })},
		{Name: "get status/id/invalid UTF-8", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.GetStatus(ctx, "task_\xff"); return err })},
		{Name: "list/status/unknown", Want: Argument, Arg: "status",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Status: "paused"})
				return err
			})},
		{Name: "list/limit/negative", Want: Argument, Arg: "limit",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Limit: -1})
				return err
			})},
		{Name: "list/offset/negative", Want: Argument, Arg: "offset",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Offset: -1})
				return err
			})},
		{Name: "list/queue/NUL", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Queue: "default\x00"})
				return err
			})},
		{Name: "stats/queue/256 bytes", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Stats(ctx, long(256)); return err })},
		{Name: "queue depth/queue/empty", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.QueueHeadroom(ctx, "", 10); return err })},
		{Name: "queue depth/max depth/negative", Want: Argument, Arg: "max depth",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.QueueHeadroom(ctx, "default", -1); return err })},
	}
}

// waitCases are the rows that wait on a task with a bad wait option.
func waitCases() []Case {
	return []Case{
		{Name: "wait/timeout/negative", Want: Argument, Arg: "Timeout",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Wait(ctx, e.Canceled.ID, &cairnq.WaitOptions{Timeout: -time.Second})
				return err
			})},
		{Name: "wait by key/poll interval/1ns", Want: Argument, Arg: "PollInterval",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.WaitByKey(ctx, "witness-canceled", &cairnq.WaitOptions{PollInterval: time.Nanosecond})
				return err
			})},
	}
}
