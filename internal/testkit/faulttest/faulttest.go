// Package faulttest is the fault suite every backend runs alike, and the
// harness it runs on. The root package runs it on SQLite (fault_test.go),
// conformance/ on Postgres through the pgx adapter (conformance/fault_test.go,
// which adds a server crash of its own).
//
// The suite kills a worker process with SIGKILL in the middle of its work
// ([KillWorker]), kills a submitting process the same way in the middle of
// its submits ([KillSubmitter]) and submits poisoned values among good ones
// ([PoisonedValues]). Each checks that nothing acknowledged is lost, that
// nothing runs twice beyond what an expired lease allows, and that no
// process panics or hangs. What differs between the backends, how to make
// a database and open a client on it, is a [Backend].
//
// The process tests re-execute the test binary as their child processes;
// environment variables tell a child what to be, and the binary's
// [Backend.ChildTest] function hands them to [Child].
//
// It is test support only: nothing outside tests imports it.
package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// Backend is what the suite needs to know about the database it runs on.
type Backend struct {
	// ChildTest names the test function of the binary that calls Child:
	// a child process is the binary re-executed to run only it.
	ChildTest string
	// NewDB makes a fresh database for one test and returns what Open
	// takes to reach it: a file path for SQLite, a connection string for
	// Postgres. The test's child processes are given it too.
	NewDB func(t *testing.T) string
	// Open returns a client on the database at dsn, closed when t ends.
	// It runs in the tests and in their child processes.
	Open func(t *testing.T, dsn string) *cairnq.Client
	// ErrDetail, if set, returns what to add to an error a child's worker
	// survived so its note names the cause in the database's own terms
	// (SQLite's result code); "" adds nothing.
	ErrDetail func(err error) string
	// SubmitterDSN, if set, rewrites dsn for the submitter process of
	// KillSubmitter, so that AfterSubmitterKill can tell its sessions
	// apart (Postgres: an application_name).
	SubmitterDSN func(dsn string) string
	// AfterSubmitterKill, if set, runs in KillSubmitter once the submitter
	// is dead and before anything reads the database: a check that the
	// kill left the database whole, or a wait for what the killed process
	// left running in a server to end, since a statement it sent may still
	// commit until then.
	AfterSubmitterKill func(t *testing.T, dsn string)
}

// The environment a child process reads: a parent sets them, unset in a
// normal run.
const (
	envRole = "CAIRNQ_FAULT_ROLE" // roleVictim, roleSurvivor or roleSubmitter
	envDSN  = "CAIRNQ_FAULT_DSN"  // the shared database, as Backend.Open takes it
	envOut  = "CAIRNQ_FAULT_OUT"  // the child's own output file
	envGo   = "CAIRNQ_FAULT_GO"   // a survivor starts its worker once this file exists
	envStop = "CAIRNQ_FAULT_STOP" // a survivor exits once this file exists
	envID   = "CAIRNQ_FAULT_ID"   // a worker's id
)

// The roles a child process plays.
const (
	roleVictim    = "victim"    // a worker killed in the middle of its work
	roleSurvivor  = "survivor"  // a worker that finishes what the victim left
	roleSubmitter = "submitter" // submits until killed
)

const (
	// Job is the task name the suite's workers run. The Postgres restart
	// test submits it too, so its tasks read like the rest of the suite's.
	Job = "fault.job"

	// Watchdog bounds every wait of the suite. It detects a hang; it is
	// not a claim about speed.
	Watchdog = 60 * time.Second

	// The victim runs victimRuns tasks normally, then holds each of the
	// next victimHeld until it is killed: those are certainly in flight
	// when the kill comes, while its other slots keep claiming and
	// settling.
	victimRuns = 30
	victimHeld = 4
	workerConc = 8
	// The submitter's goroutines; each has at most one submit in flight.
	submitters = 32
)

// SkipInChild skips t in a child process: a child runs only the binary's
// Backend.ChildTest, so every other fault test steps aside.
func SkipInChild(t *testing.T) {
	t.Helper()
	if os.Getenv(envRole) != "" {
		t.Skip("running as a fault child")
	}
}

// Wait polls cond until it holds, failing the test past the watchdog with
// every goroutine's stack, since a wait that never ends is a hang.
func Wait(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(Watchdog)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v\n%s", what, Watchdog, AllGoroutines())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SameJSON reports whether got encodes the same value as want: compared
// as bytes they may differ, since Postgres stores jsonb in its own layout.
func SameJSON(got json.RawMessage, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}

// AllGoroutines returns the stack of every goroutine of the process: what
// a test that detected a hang shows.
func AllGoroutines() string {
	buf := make([]byte, 4<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// NewWorker returns a worker on c with options o, polling every 20ms
// unless o says otherwise, so the suite's tests do not wait on the default
// interval.
func NewWorker(t testing.TB, c *cairnq.Client, o *cairnq.WorkerOptions) *cairnq.Worker {
	t.Helper()
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	w, err := cairnq.NewWorker(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// StartWorker runs w until the returned stop is called (or the test
// ends), failing the test if Run returns an error or panics, or if it has
// not returned a watchdog after stop: a fault must not hang a worker.
func StartWorker(t testing.TB, w *cairnq.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("Run panicked: %v", p)
			}
		}()
		done <- w.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker Run: %v", err)
				}
			case <-time.After(Watchdog):
				t.Errorf("worker Run did not return %v after its context ended\n%s", Watchdog, AllGoroutines())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// WaitTask waits for the task id to settle and returns it, failing the
// test past the watchdog.
func WaitTask(t testing.TB, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	task, err := c.Wait(context.Background(), id, &cairnq.WaitOptions{Timeout: Watchdog, PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return task
}
