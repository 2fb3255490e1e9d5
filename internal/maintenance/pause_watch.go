package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// PauseWatch keeps a worker's queues paused for the fleet as the
// database's pause rows (engine.Store.PausedQueues) say, reading them
// every Every: so a PauseQueue anywhere stops the worker claiming from
// the queue within Every, and a ResumeQueue starts it again.
type PauseWatch struct {
	Store *engine.Store
	Every time.Duration
	// Set is given the queues paused, after each read that succeeded.
	Set func(queues []string)
	// Report is given a failed read; the pauses stay as last read.
	Report func(error)
}

// Read reads the pause rows once and hands them to Set; on an error it
// hands Set nothing.
func (p *PauseWatch) Read(ctx context.Context) error {
	pauses, err := p.Store.PausedQueues(ctx)
	if err != nil {
		return err
	}
	queues := make([]string, len(pauses))
	for i, q := range pauses {
		queues[i] = q.Queue
	}
	p.Set(queues)
	return nil
}

// ReadReporting is Read, giving Report its error unless ctx has ended,
// the database was busy (the next read comes within Every either way) or
// the store is gone (closed, its file replaced: the worker's claim says
// so and ends the worker).
func (p *PauseWatch) ReadReporting(ctx context.Context) error {
	err := p.Read(ctx)
	if err != nil && ctx.Err() == nil && !errors.Is(err, cairnqtype.ErrBusy) && !engine.Gone(err) {
		p.Report(err)
	}
	return err
}

// First reads until a read succeeds or ctx ends, every Every: a worker
// must know the pauses before its first claim, or it would claim from a
// queue paused before it started. It gives up on a store that is gone,
// whose claims fail as well and end the worker.
func (p *PauseWatch) First(ctx context.Context) {
	for err := p.ReadReporting(ctx); err != nil && ctx.Err() == nil && !engine.Gone(err); err = p.ReadReporting(ctx) {
		wake.Sleep(ctx, p.Every)
	}
}

// Run reads every Every until ctx ends.
func (p *PauseWatch) Run(ctx context.Context) {
	t := time.NewTicker(p.Every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = p.ReadReporting(ctx) // the pauses stay as last read
		case <-ctx.Done():
			return
		}
	}
}
