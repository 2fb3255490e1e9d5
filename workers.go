package cairnq

import (
	"context"
	"time"
)

// WorkerInfo is a Go worker on the database as its last beat described
// it (Client.Workers): each running Worker rewrites its row every 10
// seconds and deletes it as Run returns.
type WorkerInfo struct {
	// ID is the worker's id (WorkerOptions.ID).
	ID string
	// Host and PID are the process's host name and process id.
	Host string
	PID  int
	// Queues and Names are what it claims: its queues, and the names it
	// has handlers for.
	Queues []string
	Names  []string
	// Concurrency is its slots, and Running the calls it ran at the beat.
	Concurrency int
	Running     int
	// StartedAt is when Run began, BeatAt the last beat, by the worker's
	// clock; Every is how often it beats.
	StartedAt time.Time
	BeatAt    time.Time
	Every     time.Duration
}

// Silent reports whether the worker has missed three beats by now: it
// was killed, or is cut off from the database. A silent worker's row is
// deleted by the next worker to start a day after its last beat. A row
// that did not read as a worker's (BeatAt zero) is silent too.
func (w WorkerInfo) Silent(now time.Time) bool {
	return w.BeatAt.IsZero() || w.Every > 0 && now.Sub(w.BeatAt) > 3*w.Every
}

// Workers returns the Go workers running on the database, idle ones
// too, by id, with any that stopped without deleting their row (Silent).
// Other SDKs' workers write no row and are not listed; the tasks they
// run show their ids (Task.WorkerID).
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ws, err := c.store.Workers(ctx)
	if err != nil {
		return nil, userErr(err)
	}
	out := make([]WorkerInfo, len(ws))
	for i, w := range ws {
		out[i] = WorkerInfo(w)
	}
	return out, nil
}
