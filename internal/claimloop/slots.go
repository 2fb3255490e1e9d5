package claimloop

import "sync"

// SettlingCap bounds the calls whose handler returned but whose
// settlement has not committed yet, as a multiple of Concurrency. The
// claim loop keeps drawing while they settle, so the settlements of
// several draws share one commit; past the cap it waits, so a database
// that settles slowly slows claiming instead of piling up leases.
const SettlingCap = 4

// Slots counts one Run's calls against the worker's budgets: its
// Concurrency, each name's own cap, each resource's capacity, the bytes
// of payload in flight, and the calls settling. The loop reads them to
// size its draws; a call charges them from Begin to Release, and its
// settlement from Release to End or Settled.
type Slots struct {
	conc     int
	maxBytes int64 // 0: no bound
	freed    chan struct{}

	mu          sync.Mutex
	running     int // handler calls running
	settling    int // calls whose handler returned, settling
	calls       int // calls begun and not ended
	perName     map[string]int
	perResource map[string]int
	bytes       int64
}

// NewSlots returns the budgets of a worker running at most conc calls
// and, when maxBytes > 0, at most maxBytes of payload at once.
func NewSlots(conc int, maxBytes int64) *Slots {
	return &Slots{conc: conc, maxBytes: maxBytes, freed: make(chan struct{}, 1),
		perName: map[string]int{}, perResource: map[string]int{}}
}

// Charge is one call's share of the budgets.
type Charge struct {
	src      *Source
	size     int64
	released bool
}

// Begin charges c to the budgets: a slot, its name's and resource's
// share, its payload's bytes.
func (s *Slots) Begin(c Call) *Charge {
	ch := &Charge{src: c.Source}
	for _, t := range c.Tasks {
		ch.size += int64(len(t.Payload))
	}
	s.mu.Lock()
	s.running++
	s.calls++
	s.bytes += ch.size
	s.shares(ch.src, 1)
	s.mu.Unlock()
	return ch
}

// Release frees ch's slot (and its name's and resource's share) when its
// handler returns, not when its settlement commits: settlements are
// grouped into shared commits, and holding the slot through one would
// make claims and commits take turns. The call counts as settling from
// then on (bounded by SettlingCap). Releasing twice does nothing.
func (s *Slots) Release(ch *Charge) {
	s.mu.Lock()
	if ch.released {
		s.mu.Unlock()
		return
	}
	ch.released = true
	s.running--
	s.settling++
	s.bytes -= ch.size
	s.shares(ch.src, -1)
	s.mu.Unlock()
	s.Signal()
}

func (s *Slots) shares(src *Source, n int) {
	if src.OwnConc > 0 {
		s.perName[src.Names[0]] += n
	}
	if src.Resource != "" {
		s.perResource[src.Resource] += n
	}
}

// End ends ch's call, releasing it first if it was not. A call whose
// settlement was handed over to a completer (handedOver) goes on
// settling until Settled.
func (s *Slots) End(ch *Charge, handedOver bool) {
	s.Release(ch)
	s.mu.Lock()
	s.calls--
	if !handedOver {
		s.settling--
	}
	s.mu.Unlock()
	s.Signal()
}

// Settled ends the settling of a call that End handed over.
func (s *Slots) Settled() {
	s.mu.Lock()
	s.settling--
	s.mu.Unlock()
	s.Signal()
}

// Freed is signaled when a slot may have freed: a call released or
// ended, a settlement committed.
func (s *Slots) Freed() <-chan struct{} { return s.freed }

// Signal wakes the loop if it waits for a free slot.
func (s *Slots) Signal() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// Busy reports whether calls run or settle.
func (s *Slots) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running > 0 || s.settling > 0
}

// Over reports whether a shutdown has no call left to wait for: none
// has not ended or, once it gave up on the handlers (gaveUp) and they
// run on their calls' goroutines (inline), every call left still holds
// its slot, its handler running past its context's end.
func (s *Slots) Over(gaveUp, inline bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls == 0 || (gaveUp && inline && s.calls == s.running)
}

// free is the slots free now.
func (s *Slots) free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conc - s.running
}

// room returns the free slots, and whether the worker is full: at most
// Concurrency calls run (fewer when their payloads reach maxBytes), and
// at most SettlingCap times as many more wait for their settlement.
func (s *Slots) room() (free int, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	free = s.conc - s.running
	over := s.maxBytes > 0 && s.bytes >= s.maxBytes
	return free, (s.running > 0 && (free <= 0 || over)) || s.settling >= SettlingCap*s.conc
}

// nameRoom is how many more calls name may start under its own cap.
func (s *Slots) nameRoom(name string, capacity int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return capacity - s.perName[name]
}

// resourceRoom is how many more calls each resource has room for.
func (s *Slots) resourceRoom(capacities map[string]int) map[string]int {
	if len(capacities) == 0 {
		return nil
	}
	room := make(map[string]int, len(capacities))
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, capacity := range capacities {
		room[name] = capacity - s.perResource[name]
	}
	return room
}
