package maintenance

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
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

// ReadReporting is Read, giving Report its error unless ctx has ended.
func (p *PauseWatch) ReadReporting(ctx context.Context) {
	if err := p.Read(ctx); err != nil && ctx.Err() == nil {
		p.Report(err)
	}
}

// Run reads every Every until ctx ends.
func (p *PauseWatch) Run(ctx context.Context) {
	t := time.NewTicker(p.Every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.ReadReporting(ctx)
		case <-ctx.Done():
			return
		}
	}
}
