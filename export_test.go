package cairnq

import (
	"context"
	"sync"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// StoreOf gives the tests the store under a client, to drive the
// protocol's operations directly (a worker that dies holding a lease).
func StoreOf(c *Client) *engine.Store { return c.store }

// DoneWaiters counts the settlement subscriptions open in c's process.
func DoneWaiters(c *Client) int { return c.store.DoneWaiters() }

// SweepPaced runs one sweep of c's retention as its timer does: paced,
// from where the last ended.
func SweepPaced(ctx context.Context, c *Client) (int, error) {
	return c.sweeper.Sweep(ctx, false, true)
}

// SetSweepIdle sets how many times as long as a batch took c's paced
// sweeps wait after it.
func SetSweepIdle(c *Client, idle int) { c.sweeper.Idle = idle }

// ClaimCall is one claim a worker made: what it asked and what the
// claim reported.
type ClaimCall struct {
	Request engine.ClaimRequest
	Result  engine.Claimed
}

// RecordClaims makes w keep every claim it makes from now on (call
// it before Run); calls returns those so far, oldest first.
func RecordClaims(w *Worker) (calls func() []ClaimCall) {
	r := &recordingClaimer{claimer: w.claims}
	w.claims = r
	return func() []ClaimCall {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]ClaimCall(nil), r.calls...)
	}
}

type recordingClaimer struct {
	claimer
	mu    sync.Mutex
	calls []ClaimCall
}

func (r *recordingClaimer) Claims(ctx context.Context, req engine.ClaimRequest) (engine.Claimed, error) {
	res, err := r.claimer.Claims(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ClaimCall{Request: req, Result: res})
	return res, err
}
