package cairnq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// The gate hands out up to maxGrant submits per queue on one depth probe's
// word, so a burst of submits costs one bounded read, not one each. That
// makes the limit soft: N producers may overshoot it by up to
// (N-1)*maxGrant. Making it exact would put a scan inside every submit's
// write transaction.
const (
	maxGrant            = 64
	firstProbeBackoff   = 250 * time.Millisecond
	maxProbeBackoff     = 5 * time.Second
	defaultMaxQueueWait = 10 * time.Minute
)

// depthGate makes submits wait while their queue is full.
type depthGate struct {
	st       *engine.Store
	def      int
	perQueue map[string]int
	maxWait  time.Duration

	mu     sync.Mutex
	grants map[string]int
}

func newDepthGate(st *engine.Store, o *Options) (*depthGate, error) {
	if o.MaxQueueDepth < 0 {
		return nil, &ArgumentError{Op: "open", Arg: "MaxQueueDepth", Reason: fmt.Sprintf("must be >= 0, got %d", o.MaxQueueDepth)}
	}
	for q, n := range o.QueueDepths {
		if n < 1 {
			return nil, &ArgumentError{Op: "open", Arg: "QueueDepths", Reason: fmt.Sprintf("[%q] must be >= 1, got %d", q, n)}
		}
	}
	if o.MaxQueueWait < 0 {
		return nil, &ArgumentError{Op: "open", Arg: "MaxQueueWait", Reason: fmt.Sprintf("must be >= 0, got %v", o.MaxQueueWait)}
	}
	if o.MaxQueueDepth == 0 && len(o.QueueDepths) == 0 {
		return nil, nil
	}
	g := &depthGate{st: st, def: o.MaxQueueDepth, perQueue: o.QueueDepths, maxWait: o.MaxQueueWait, grants: map[string]int{}}
	if g.maxWait == 0 {
		g.maxWait = defaultMaxQueueWait
	}
	return g, nil
}

func (g *depthGate) limit(queue string) int {
	if n, ok := g.perQueue[queue]; ok {
		return n
	}
	return g.def
}

// acquire returns once queue has room for one more task, or fails with
// *QueueFullError after maxWait.
func (g *depthGate) acquire(ctx context.Context, queue string) error {
	limit := g.limit(queue)
	if limit == 0 {
		return nil
	}
	start := time.Now()
	backoff := firstProbeBackoff
	for {
		if g.take(queue) {
			return nil
		}
		headroom, err := g.st.QueueHeadroom(ctx, queue, limit)
		if err != nil {
			return err
		}
		if headroom > 0 {
			g.mu.Lock()
			g.grants[queue] = min(headroom, maxGrant)
			g.mu.Unlock()
			continue
		}
		waited := time.Since(start)
		if waited >= g.maxWait {
			return &QueueFullError{Queue: queue, MaxDepth: limit, Waited: waited}
		}
		if !sleepCtx(ctx, min(backoff, g.maxWait-waited)) {
			return ctx.Err()
		}
		backoff = min(backoff*2, maxProbeBackoff)
	}
}

// acquireMany is acquire for n tasks bound for queue at once (a
// SubmitMany batch): it waits, as one submit does, for room for one, and
// then spends the grants the other n-1 would have taken, so that the
// submits after the batch probe the depth again rather than trust room
// the batch has filled. The batch itself may take queue past its limit
// by up to n-1.
func (g *depthGate) acquireMany(ctx context.Context, queue string, n int) error {
	if err := g.acquire(ctx, queue); err != nil {
		return err
	}
	g.mu.Lock()
	g.grants[queue] = max(0, g.grants[queue]-(n-1))
	g.mu.Unlock()
	return nil
}

func (g *depthGate) take(queue string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.grants[queue] > 0 {
		g.grants[queue]--
		return true
	}
	return false
}
