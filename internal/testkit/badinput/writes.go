package badinput

import (
	"context"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// writeCases are the rows that change tasks by id or key: Cancel, Retry and
// their ByKey forms, and Purge.
func writeCases() []Case {
	return []Case{
		{Name: "cancel/id/empty", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Cancel(ctx, ""); return err })},
		{Name: "cancel/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Cancel(ctx, e.Queued.ID+"\x00"); return err })},
		{Name: "cancel by key/key/NUL", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.CancelByKey(ctx, "witness-queued\x00")
				return err
			})},
		{Name: "retry/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Retry(ctx, e.Canceled.ID+"\x00", nil)
				return err
			})},
		{Name: "retry by key/key/1025 bytes", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.RetryByKey(ctx, key1024+"k", nil)
				return err
			})},
		{Name: "purge/status/queued", Want: Argument, Arg: "status",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{Status: cairnq.StatusQueued})
				return err
			})},
		{Name: "purge/limit/negative", Want: Argument, Arg: "limit",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{Limit: -1})
				return err
			})},
		{Name: "purge/older than/negative", Want: Argument, Arg: "older than",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{OlderThan: -time.Hour})
				return err
			})},
	}
}
