package cairnqtype

// Signal says why a watch fired. It carries no state: the row is the truth.
type Signal struct {
	Reason string // "queued", "done" or "poll"
	Queue  string // the queue a task was queued on (queued only)
	TaskID string // the task that finished (done only)
}
