package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"sync"
)

// Completion is one task's success on its way to the database: written
// alone (Store.Complete), grouped with others by the SQLite writer or the
// Postgres grouper, or handed over by a worker (Pending) to ride on its
// next claim (ClaimRequest.Settle) or to be written with others in one
// statement (SettleCompletions).
type Completion struct {
	ID, WorkerID string
	Result       any // the result's JSON text, or nil to store none

	// Step, when set, says the task is a workflow's step that added no
	// steps: the write that carries the completion also advances its
	// workflow (settleIn), and sets Advanced to what that did.
	Step     *StepMark
	Advanced Advanced
	// Rows is the worker's lock on its multi-row writes (its heartbeat),
	// held on Postgres while complete_many settles the completion with
	// others; nil for none.
	Rows sync.Locker

	// Set by the write that carried it: the status the task took, or
	// Err, a *LostLeaseError, when its lease was gone.
	Status cairnqtype.Status
	Err    error

	// Done, when set, receives the error of the write that carried the
	// completion, nil when it ran (Status or Err then says how it fared).
	Done chan error
}

// The bounds of a hand-over: a larger result is written alone
// (Store.Complete), and one write carries at most MaxHandOverBytes of
// results.
const (
	MaxHandOverResult = 64 << 10
	MaxHandOverBytes  = 1 << 20
)

// HandOverResult encodes a handler's result for a completion that shares
// its write with others. ok is false for a result that cannot (not JSON,
// or larger than MaxHandOverResult): its task settles alone, whose path
// reports what is wrong with it.
func HandOverResult(result any) (enc any, ok bool) {
	enc, err := EncodeResult(result)
	if err != nil {
		return nil, false
	}
	if text, isText := enc.(string); isText && len(text) > MaxHandOverResult {
		return nil, false
	}
	return enc, true
}

// Pending holds the completions a worker has handed over and not yet
// written. Safe for concurrent use; the zero value is empty and open.
type Pending struct {
	mu     sync.Mutex
	list   []*Completion
	closed bool
}

// Add queues c and reports true, or false when Close has been called.
func (p *Pending) Add(c *Completion) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.list = append(p.list, c)
	return true
}

// Take removes and returns what one write carries: the oldest completion,
// and after it as many as fit in MaxHandOverBytes of results. Empty when
// nothing waits.
func (p *Pending) Take() []*Completion {
	p.mu.Lock()
	defer p.mu.Unlock()
	size, n := 0, 0
	for n < len(p.list) {
		if text, ok := p.list[n].Result.(string); ok {
			if n > 0 && size+len(text) > MaxHandOverBytes {
				break
			}
			size += len(text)
		}
		n++
	}
	if n == 0 {
		return nil
	}
	taken := p.list[:n:n]
	p.list = append([]*Completion(nil), p.list[n:]...)
	return taken
}

// Close refuses further completions; those already waiting stay for Take.
func (p *Pending) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// Answer sends err to the Done channel of each of cs that has one.
func Answer(cs []*Completion, err error) {
	for _, c := range cs {
		if c.Done != nil {
			c.Done <- err
		}
	}
}
