// Package attempt runs one handler call of a worker: on the caller's
// goroutine or on one of its own, bounded by a time limit and by the
// worker's giving up at shutdown, with a panic turned into a
// *PanicError and a runtime.Goexit into ErrExited. It knows nothing of
// tasks: the worker hands it the call as a function.
package attempt

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Outcome is what one handler call returned: a single task's result, or
// a batch's results by task id, and its error.
type Outcome struct {
	Result  any
	Results map[string]any
	Err     error
}

// The ends of a call that returned no outcome of its own.
var (
	// ErrExited marks a call whose handler called runtime.Goexit.
	ErrExited = errors.New("cairnq: handler called runtime.Goexit; its task is left to its lease")
	// ErrAbandoned marks a call the worker stopped waiting for at
	// shutdown.
	ErrAbandoned = errors.New("cairnq: handler still running after shutdown; abandoned")
	// ErrTimeout marks an attempt abandoned at its time limit (MaxRun).
	ErrTimeout = errors.New("cairnq: attempt exceeded MaxRun")
)

// PanicError is a handler's panic, with the stack it panicked on.
type PanicError struct {
	Value any
	Stack string
}

// Error says what the handler panicked with.
func (p *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.Value) }

// Guard runs call and returns its outcome, or a *PanicError if it
// panicked. A call that runs runtime.Goexit (t.FailNow in a test) gives
// no outcome: Guard tells exited, and the goroutine goes on ending.
func Guard(call func() Outcome, exited func()) (o Outcome) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			o = Outcome{Err: &PanicError{Value: p, Stack: string(debug.Stack())}}
			return
		}
		exited()
	}()
	o = call()
	returned = true
	return o
}

// Limits bound a call that Run does not run inline.
type Limits struct {
	// MaxRun, when positive, is how long Run waits for the call: past it
	// Run tells TimedOut and returns ErrTimeout.
	MaxRun time.Duration
	// TimedOut is told before Run returns ErrTimeout, so that the caller
	// can refuse what the still running handler writes.
	TimedOut func()
	// GiveUp, once closed, makes Run return ErrAbandoned.
	GiveUp <-chan struct{}
}

// Run runs call (a Guard'ed call) on a goroutine of its own, so that a
// handler ignoring its context holds up neither the call past l.MaxRun
// nor a shutdown past l.GiveUp: Go cannot stop it, but the worker need
// not wait. That goroutine ends when the handler returns. A call with
// neither bound runs best on the caller's goroutine, through Guard
// alone: no goroutine, no hand-off, and no allocation for its funcs.
func Run(l Limits, call func() Outcome) Outcome {
	done := make(chan Outcome, 1)
	go func() {
		o := Outcome{Err: ErrExited} // unless call returns
		defer func() { done <- o }()
		o = call()
	}()
	var timeout <-chan time.Time
	if l.MaxRun > 0 {
		timer := time.NewTimer(l.MaxRun)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case o := <-done:
		return o
	case <-timeout:
		if l.TimedOut != nil {
			l.TimedOut()
		}
		return Outcome{Err: ErrTimeout}
	case <-l.GiveUp:
		return Outcome{Err: ErrAbandoned}
	}
}
