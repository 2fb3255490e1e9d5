package completer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// ride is the form where a plain success waits for the claim loop's next
// claim, which writes it in the claim's transaction
// (engine.ClaimRequest.Settle): on SQLite a busy worker's cycle is then one
// request to the single writer and one commit, where it was a request per
// finished call beside the claim's. The loop never holds a success back:
// it claims as soon as one arrives (Wake), and when it cannot claim
// (every slot busy, every queue paused) it writes them alone
// (SettleWaiting). The ride is open only while the loop's last claim drew
// several tasks or left other calls running or settling (OpenRide): a
// lone call's success goes straight to the writer, as the claim would add
// its statement and two hand-offs to the call's latency.
//
// Not on Postgres: there the claim is a round trip during which the slots
// it fills stand idle, and riding on it would lengthen that round trip
// (docs/benchmarks.md has the measurement).
type ride struct {
	*writer

	waiting engine.Pending
	mu      sync.Mutex
	riding  bool        // between Start and EndClaims
	open    atomic.Bool // riding, and the loop's last claim allows
}

// errRideEnded answers the successes still waiting when the loop ends;
// they are written on their own.
var errRideEnded = errors.New("cairnq: the claim loop ended")

func (r *ride) Start(context.Context) {
	r.mu.Lock()
	r.riding = true
	r.mu.Unlock()
}

func (r *ride) Stop() <-chan struct{} { return closed }

func (r *ride) Settle(ctx context.Context, st engine.Settlement, rec Recorder, _ bool) bool {
	if out, err, ok := r.byClaim(st); ok {
		rec.Settled(st, out, err, false)
		return false
	}
	r.settle(ctx, st, rec)
	return false
}

// byClaim writes st through the loop's next claim. ok is false, having
// written nothing, when that path is not open or st cannot share a
// write, or when the write that carried it failed: the caller then
// writes st on its own, which retries.
func (r *ride) byClaim(st engine.Settlement) (out engine.Settled, err error, ok bool) {
	if !r.open.Load() {
		return engine.Settled{}, nil, false // before encoding: the caller's path encodes anyway
	}
	c, ok := groupable(st)
	if !ok {
		return engine.Settled{}, nil, false
	}
	c.Done = make(chan error, 1)
	if !r.waiting.Add(c) { // the loop has ended since
		return engine.Settled{}, nil, false
	}
	if r.cfg.Wake != nil {
		r.cfg.Wake()
	}
	// The loop answers every success it accepted, at the latest when it
	// ends (EndClaims).
	if err := <-c.Done; err != nil {
		return engine.Settled{}, nil, false
	}
	out, ok, err = outcomeOf(c)
	return out, err, ok
}

func (r *ride) RidesClaims() bool { return true }

func (r *ride) OpenRide(open bool) {
	r.mu.Lock()
	r.open.Store(r.riding && open)
	r.mu.Unlock()
}

func (r *ride) Take() []*engine.Completion { return r.waiting.Take() }

func (r *ride) Answer(taken []*engine.Completion, err error) { engine.Answer(taken, err) }

func (r *ride) SettleWaiting(ctx context.Context) bool {
	settled := false
	for {
		taken := r.waiting.Take()
		if len(taken) == 0 {
			return settled
		}
		settled = true
		engine.Answer(taken, r.cfg.Store.SettleCompletions(ctx, taken))
	}
}

func (r *ride) EndClaims() {
	r.mu.Lock()
	r.riding = false
	r.open.Store(false)
	r.mu.Unlock()
	r.waiting.Close()
	for taken := r.waiting.Take(); len(taken) > 0; taken = r.waiting.Take() {
		engine.Answer(taken, errRideEnded)
	}
}
