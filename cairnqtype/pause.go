package cairnqtype

import "time"

// QueuePause is a queue paused for every Go worker on the database.
type QueuePause struct {
	// Queue is the paused queue.
	Queue string
	// At is when the pause was written, by the pausing process's clock.
	At time.Time
	// By names who paused the queue: an operator's name, or by default
	// the pausing process's host and pid.
	By string
	// Reason is the operator's note, or "".
	Reason string
}
