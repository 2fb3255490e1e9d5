package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/storeaccess"
)

func init() {
	storeaccess.Ops = func(s any) any { return ops{s.(*Store)} }
}

// ops is a Store's machinery as internal/storeaccess hands it to the root
// package. Each method is the unexported operation of the same name.
type ops struct{ s *Store }

func (o ops) Claim(ctx context.Context, p ClaimParams, h storeaccess.ClaimHints) ([]*Task, error) {
	return o.s.claim(ctx, p, h)
}

func (o ops) ClaimSession(ctx context.Context, p ClaimParams, h storeaccess.ClaimHints, plan func(draw func(names []string, limit int) ([]*Task, error)) error) (bool, error) {
	return o.s.claimSession(ctx, p, h, false, plan)
}

func (o ops) SubscribeQueued(ctx context.Context, queues []string) (<-chan struct{}, func()) {
	return o.s.subscribeQueued(ctx, queues)
}

func (o ops) SubscribeDone(ctx context.Context, id string) (<-chan struct{}, func()) {
	return o.s.subscribeDone(ctx, id)
}

func (o ops) Subscribe(ctx context.Context) (<-chan Signal, func()) { return o.s.subscribe(ctx) }

func (o ops) DoneWaiters() int { return o.s.doneWaiters() }

func (o ops) ValidateName(op, arg, s string) error { return validateName(op, arg, s) }

func (o ops) ValidateSubmit(p SubmitParams) error { return validateSubmit(p) }

func (o ops) ValidatePurge(p PurgeParams) error { return validatePurge(p) }

func (o ops) CompleteWith(ctx context.Context, id, workerID string, fn func(ctx context.Context, sess executor.Session) (any, error)) (*Task, error) {
	return o.s.completeWith(ctx, id, workerID, fn)
}

func (o ops) SettleCompletions(ctx context.Context, cs []*storeaccess.Completion) error {
	return o.s.settleCompletions(ctx, cs)
}

func (o ops) EncodeResult(v any) (any, error) { return encodeResult(v) }
