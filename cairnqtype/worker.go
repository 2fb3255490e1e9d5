package cairnqtype

import "time"

// WorkerInfo is a Go worker as its last beat described it.
type WorkerInfo struct {
	ID          string
	Host        string
	PID         int
	Queues      []string
	Names       []string
	Concurrency int
	Running     int
	StartedAt   time.Time
	BeatAt      time.Time
	Every       time.Duration
}
