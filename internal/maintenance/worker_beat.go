package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// Beat keeps a worker's row of cairnq_meta (engine.Store.WorkerBeat)
// while the worker runs: written as it starts and every Every, deleted
// as it stops, so that an operator sees idle workers too, with their
// host and last beat. At its start it also deletes the rows of workers
// whose last beat is older than engine.WorkerForgetAfter.
type Beat struct {
	Store *engine.Store
	Every time.Duration
	// Info is the worker now; Beat sets its BeatAt and Every.
	Info func() cairnqtype.WorkerInfo
	// Report is given a failed write or delete; the next beat tries again.
	Report func(error)
}

// forgetTimeout bounds the delete of a stopping worker's row: the
// worker's stop waits for it.
const forgetTimeout = 2 * time.Second

// Run beats until ctx ends, then deletes the row.
func (b *Beat) Run(ctx context.Context) {
	b.beat(ctx)
	b.forgetOld(ctx)
	t := time.NewTicker(b.Every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.beat(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
			defer cancel()
			b.report(fctx, b.Store.WorkerForget(fctx, b.Info().ID))
			return
		}
	}
}

// beat writes the row once. The write runs on past ctx's end (for at
// most forgetTimeout), so that it cannot commit after the stop's delete.
func (b *Beat) beat(ctx context.Context) {
	w := b.Info()
	w.BeatAt, w.Every = time.Now(), b.Every
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
	defer cancel()
	b.report(ctx, b.Store.WorkerBeat(wctx, w))
}

// forgetOld deletes the rows of workers silent for WorkerForgetAfter.
func (b *Beat) forgetOld(ctx context.Context) {
	ws, err := b.Store.Workers(ctx)
	if err != nil {
		b.report(ctx, err)
		return
	}
	for _, w := range ws {
		if !w.BeatAt.IsZero() && time.Since(w.BeatAt) > engine.WorkerForgetAfter {
			b.report(ctx, b.Store.WorkerForget(ctx, w.ID))
		}
	}
}

// report gives Report err, unless ctx has ended, the database was busy
// or the store is gone (the worker's loop says so).
func (b *Beat) report(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil && !errors.Is(err, cairnqtype.ErrBusy) && !engine.Gone(err) {
		b.Report(err)
	}
}
