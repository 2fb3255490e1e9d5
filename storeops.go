package cairnq

import (
	"context"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/storeaccess"
)

func init() {
	storeaccess.ClientStore = func(c any) any { return c.(*Client).store }
}

// drawFunc claims up to limit tasks named in names inside a claim session.
type drawFunc = func(names []string, limit int) ([]*engine.Task, error)

// storeOps is what a Client and its Workers use of a store beyond its
// exported operations. Package store provides it through
// internal/storeaccess (see there why).
type storeOps interface {
	Claim(ctx context.Context, p engine.ClaimParams, h storeaccess.ClaimHints) ([]*engine.Task, error)
	ClaimSession(ctx context.Context, p engine.ClaimParams, h storeaccess.ClaimHints, plan func(draw drawFunc) error) (bool, error)
	SubscribeQueued(ctx context.Context, queues []string) (<-chan struct{}, func())
	SubscribeDone(ctx context.Context, id string) (<-chan struct{}, func())
	Subscribe(ctx context.Context) (<-chan engine.Signal, func())
	DoneWaiters() int
	SettleCompletions(ctx context.Context, cs []*storeaccess.Completion) error
	EncodeResult(v any) (any, error)
	CompleteWith(ctx context.Context, id, workerID string, fn func(ctx context.Context, sess executor.Session) (any, error)) (*engine.Task, error)
	ValidateName(op, arg, s string) error
	ValidateSubmit(p engine.SubmitParams) error
	ValidatePurge(p engine.PurgeParams) error
}

// opsOf returns st's machinery. The assertion fails only if package store
// and storeOps disagree on a method, which every test would show.
func opsOf(st *engine.Store) storeOps { return storeaccess.Ops(st).(storeOps) }
