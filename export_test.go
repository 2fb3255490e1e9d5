package cairnq

import (
	"context"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
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
	return c.sweeper.sweep(ctx, false, true)
}

// SetSweepIdle sets how many times as long as a batch took c's paced
// sweeps wait after it.
func SetSweepIdle(c *Client, idle int) { c.sweeper.idle = idle }

// ClaimCall is one claim session a worker ran: the hints it passed and
// what the session reported.
type ClaimCall struct {
	Hints  engine.ClaimHints
	Result engine.SessionResult
}

// RecordClaims makes w keep every claim session it runs from now on (call
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

func (r *recordingClaimer) ClaimSession(ctx context.Context, p cairnqtype.ClaimParams, h engine.ClaimHints, single bool, plan func(draw drawFunc) error) (engine.SessionResult, error) {
	res, err := r.claimer.ClaimSession(ctx, p, h, single, plan)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ClaimCall{Hints: h, Result: res})
	return res, err
}
