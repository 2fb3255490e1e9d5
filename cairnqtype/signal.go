package cairnqtype

// Signal says why a watch fired: Reason "queued" (a task was queued on
// Queue), "done" (task TaskID finished) or "poll" (a change no signal
// names, such as another process's commit to the SQLite file, or the
// watch's timer). It carries no state: the row is the truth.
type Signal struct {
	Reason string // "queued", "done" or "poll"
	Queue  string // the queue a task was queued on (queued only)
	TaskID string // the task that finished (done only)
}
