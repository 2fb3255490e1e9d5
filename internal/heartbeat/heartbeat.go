// Package heartbeat renews the leases a worker holds: one statement per
// beat for every task it runs, so that a handler running longer than its
// lease keeps it, and a task missing from the reply (its lease gone, or
// the task settled meanwhile) is told so, alone, while its neighbours run
// on. A beat also reads whether a cancel was requested of each task.
package heartbeat

import (
	"context"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// Lease is one task a beat renews.
type Lease interface {
	// ID is the task's id.
	ID() string
	// Renewed says the beat renewed the lease, and whether a cancel of
	// the task has been requested.
	Renewed(cancelRequested bool)
	// Missed says the beat found the task no longer running under this
	// worker: its lease lost, unless a settlement of it was being written.
	Missed()
}

// Store is what a beat renews through: an *engine.Store.
type Store interface {
	// HeartbeatBatch renews ids' leases held by workerID, reporting for
	// each still held whether a cancel was requested.
	HeartbeatBatch(ctx context.Context, ids []string, workerID string, lease time.Duration) (map[string]bool, error)
}

// Beat renews a worker's leases every Every until Run's context ends.
type Beat struct {
	// Store is what the beat renews through.
	Store Store
	// WorkerID is the worker whose leases it renews.
	WorkerID string
	// Every is the beat's interval: a third of the lease by default.
	Every time.Duration
	// Lease is how long each renewal extends a lease from now.
	Lease time.Duration
	// Rows, when set, is held around each renewal: the worker's grouped
	// settlements update many of its rows in one statement too, and two
	// such statements side by side can deadlock.
	Rows sync.Locker
	// Held returns the leases to renew now. Required.
	Held func() []Lease
	// Report is told of a beat that failed past its interval's retries,
	// with the first task it held. Required.
	Report func(err error, id string)
}

// Run beats until ctx ends.
func (b *Beat) Run(ctx context.Context) {
	t := time.NewTicker(b.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.beat(ctx)
	}
}

// beat renews what is held now, and tells each lease how it fared.
func (b *Beat) beat(ctx context.Context) {
	held := b.Held()
	if len(held) == 0 {
		return
	}
	ids := make([]string, len(held))
	for i, l := range held {
		ids[i] = l.ID()
	}
	renewed, err := b.renew(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			b.Report(err, ids[0])
		}
		return
	}
	for i, l := range held {
		if cancel, ok := renewed[ids[i]]; ok {
			l.Renewed(cancel)
		} else {
			// The task may have settled while the beat was in flight,
			// which takes it out of running and out of the reply.
			l.Missed()
		}
	}
}

// renew renews ids' leases in one statement, tried again within the
// beat's interval while it fails for a reason that may pass
// (completer.Transient): a busy database, a dropped connection, or a
// deadlock. A beat and a grouped settlement lock the rows they share in
// whatever order their plans visit them (heap order for a bitmap scan or
// a hash join), so under load they can deadlock, and the server rolls
// one back; a settlement is retried the same way. Within a worker they
// no longer overlap (Rows); the retries stay for beats and settlements
// that meet other writers. The next beat would renew the leases anyway;
// what is reported is only what outlasts the interval.
func (b *Beat) renew(ctx context.Context, ids []string) (map[string]bool, error) {
	deadline := time.Now().Add(b.Every)
	backoff := 10 * time.Millisecond
	for {
		if b.Rows != nil {
			b.Rows.Lock()
		}
		renewed, err := b.Store.HeartbeatBatch(ctx, ids, b.WorkerID, b.Lease)
		if b.Rows != nil {
			b.Rows.Unlock()
		}
		if err == nil || !completer.Transient(err) || time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return renewed, err
		}
		wake.Sleep(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}
