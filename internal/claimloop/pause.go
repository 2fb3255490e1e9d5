package claimloop

import "sync"

// Pause is which of a worker's queues are paused: by the worker's own
// Pause (Set), or for the whole fleet (SetFleet, from the rows a
// PauseQueue wrote). Its lock is held by the loop across a claim and the
// start of what it drew, so a Set waits out a claim in progress: once
// Set returns, nothing more of those queues starts until they resume.
type Pause struct {
	queues  []string
	mu      sync.Mutex
	paused  map[string]bool
	fleet   map[string]bool
	resumed chan struct{} // wakes a loop idle because every queue is paused
}

// NewPause returns the pause state of a worker claiming from queues,
// none of them paused.
func NewPause(queues []string) *Pause {
	return &Pause{queues: queues, paused: map[string]bool{}, fleet: map[string]bool{}, resumed: make(chan struct{}, 1)}
}

// SetFleet makes queues the ones paused for the fleet, after any claim
// in progress, and returns the worker's queues it paused and resumed
// (each in the worker's queue order). Queues not the worker's are
// ignored.
func (p *Pause) SetFleet(queues []string) (paused, resumed []string) {
	now := make(map[string]bool, len(queues))
	for _, q := range queues {
		now[q] = true
	}
	p.mu.Lock()
	for _, q := range p.queues {
		switch {
		case now[q] && !p.fleet[q]:
			paused = append(paused, q)
		case !now[q] && p.fleet[q]:
			resumed = append(resumed, q)
		}
	}
	clear(p.fleet)
	for _, q := range p.queues {
		if now[q] {
			p.fleet[q] = true
		}
	}
	p.mu.Unlock()
	if len(resumed) > 0 {
		p.wake()
	}
	return paused, resumed
}

// wake wakes a loop idle because every queue was paused.
func (p *Pause) wake() {
	select {
	case p.resumed <- struct{}{}:
	default:
	}
}

// Set pauses (or resumes) queues, every one of which must be the
// worker's, after any claim in progress.
func (p *Pause) Set(queues []string, paused bool) {
	p.mu.Lock()
	for _, q := range queues {
		p.paused[q] = paused
	}
	p.mu.Unlock()
	if !paused {
		p.wake()
	}
}

// Paused returns the queues Set paused, in the worker's queue order.
func (p *Pause) Paused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, q := range p.queues {
		if p.paused[q] {
			out = append(out, q)
		}
	}
	return out
}

// hold takes the lock a claim holds until what it drew has started, and
// returns the queues paused neither way.
func (p *Pause) hold() []string {
	p.mu.Lock()
	active := make([]string, 0, len(p.queues))
	for _, q := range p.queues {
		if !p.paused[q] && !p.fleet[q] {
			active = append(active, q)
		}
	}
	return active
}

func (p *Pause) release() { p.mu.Unlock() }
