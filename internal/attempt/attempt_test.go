package attempt

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Guard returns what the call returned, turns a panic into a
// *PanicError with its stack, and tells exited of a runtime.Goexit.
func TestGuard(t *testing.T) {
	o := Guard(func() Outcome { return Outcome{Result: 7} }, func() { t.Error("exited on a return") })
	if o.Result != 7 || o.Err != nil {
		t.Fatalf("a call that returned: %+v", o)
	}
	o = Guard(func() Outcome { panic("boom") }, func() { t.Error("exited on a panic") })
	var pe *PanicError
	if !errors.As(o.Err, &pe) || pe.Value != "boom" || !strings.Contains(pe.Stack, "attempt_test.go") {
		t.Fatalf("a call that panicked: %v", o.Err)
	}
	exited := make(chan struct{})
	go func() {
		Guard(func() Outcome { runtime.Goexit(); return Outcome{} }, func() { close(exited) })
		t.Error("Guard returned after a Goexit")
	}()
	<-exited
}

// Run waits for the call, or returns ErrTimeout past MaxRun (having told
// TimedOut), or ErrAbandoned once GiveUp closes, leaving the call to run
// on; a call on its own goroutine that exits is ErrExited.
func TestRunBoundsTheCall(t *testing.T) {
	if o := Run(Limits{}, func() Outcome { return Outcome{Result: 1} }); o.Result != 1 {
		t.Fatalf("a call that returned: %+v", o)
	}
	release := make(chan struct{})
	defer close(release)
	stuck := func() Outcome { <-release; return Outcome{} }
	timedOut := false
	if o := Run(Limits{MaxRun: time.Millisecond, TimedOut: func() { timedOut = true }}, stuck); o.Err != ErrTimeout || !timedOut {
		t.Fatalf("a call past MaxRun: %v, TimedOut told %v", o.Err, timedOut)
	}
	giveUp := make(chan struct{})
	close(giveUp)
	if o := Run(Limits{GiveUp: giveUp}, stuck); o.Err != ErrAbandoned {
		t.Fatalf("a call given up on: %v", o.Err)
	}
	if o := Run(Limits{}, func() Outcome { runtime.Goexit(); return Outcome{} }); o.Err != ErrExited {
		t.Fatalf("a call that exited: %v", o.Err)
	}
}
