package cairnqtype

// Signal says why a watch fired: Reason "queued" (a task was queued on
// Queue), "done" (task TaskID finished), "changed" (a change no signal
// names: another process's commit to the SQLite file) or "poll" (the
// watch's timer). It carries no state: the row is the truth.
type Signal struct {
	Reason string // "queued", "done", "changed" or "poll"
	Queue  string // the queue a task was queued on (queued only)
	TaskID string // the task that finished (done only)
}
