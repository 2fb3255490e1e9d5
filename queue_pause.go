package cairnq

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// QueuePause is a queue paused for every Go worker on the database
// (Client.PauseQueue).
type QueuePause struct {
	// Queue is the paused queue.
	Queue string
	// At is when the pause was written, by the pausing process's clock.
	At time.Time
	// By names who paused the queue: PauseOptions.By, or the pausing
	// process's host and pid.
	By string
	// Reason is PauseOptions.Reason, or "".
	Reason string
}

// PauseOptions are PauseQueue's.
type PauseOptions struct {
	// By names who pauses the queue, for operators reading it later: at
	// most 255 bytes. Default: this process's host name and pid, as
	// "host:1234".
	By string
	// Reason is a note for operators: at most MaxPauseReasonBytes.
	Reason string
}

// MaxPauseReasonBytes bounds PauseOptions.Reason.
const MaxPauseReasonBytes = engine.MaxPauseReasonBytes

// PauseQueue pauses queue for every Go worker on the database: each one
// that claims from it stops claiming from it within its PollInterval
// (Worker.Pause stops one worker at once), leaving the calls in flight
// to run and settle as usual, until ResumeQueue. Submits to the queue go
// on. It returns the pause in force, as sync.Map's LoadOrStore returns
// its value: this call's, or (already true) that of an earlier
// PauseQueue, which pausing a paused queue leaves as it was.
//
// The pause is a row of the protocol's cairnq_meta table (the format is
// in docs/operators.md), so it outlives every process and needs no
// worker running. The TypeScript and Python SDKs' workers do not read
// it: they go on claiming from a paused queue.
//
// An empty or overlong queue, By or Reason is an *ArgumentError, and
// nothing is written.
func (c *Client) PauseQueue(ctx context.Context, queue string, opts *PauseOptions) (pause *QueuePause, already bool, err error) {
	if err := checkCtx(ctx, "pause queue"); err != nil {
		return nil, false, err
	}
	if opts == nil {
		opts = &PauseOptions{}
	}
	by := opts.By
	if by == "" {
		by = processName()
	}
	p, already, err := c.store.PauseQueue(ctx, queue, by, opts.Reason)
	if err != nil {
		return nil, false, err
	}
	out := QueuePause(p)
	return &out, already, nil
}

// ResumeQueue lifts PauseQueue's pause of queue and returns it, or nil
// when the queue was not paused. Workers claim from it again within
// their PollInterval. A queue paused by Worker.Pause stays paused in
// that worker.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (*QueuePause, error) {
	if err := checkCtx(ctx, "resume queue"); err != nil {
		return nil, err
	}
	p, err := c.store.ResumeQueue(ctx, queue)
	if err != nil || p == nil {
		return nil, err
	}
	out := QueuePause(*p)
	return &out, nil
}

// PausedQueues returns the queues PauseQueue paused, by name.
func (c *Client) PausedQueues(ctx context.Context) ([]QueuePause, error) {
	if err := checkCtx(ctx, "paused queues"); err != nil {
		return nil, err
	}
	ps, err := c.store.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	return pausesOf(ps), nil
}

// pausesOf is the engine's pauses under this package's name.
func pausesOf(ps []cairnqtype.QueuePause) []QueuePause {
	out := make([]QueuePause, len(ps))
	for i, p := range ps {
		out[i] = QueuePause(p)
	}
	return out
}

// processName is this process's host name and pid, as "host:1234".
func processName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
