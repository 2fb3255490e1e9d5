package main

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The sustained run's default rate is half what each system can submit
// and run at once. The measurement counts both with the backlog between
// them bounded by twice the worker's concurrency, and stops every
// goroutine it and the system started, for cairnq and for River.
func TestSustainedCapacityBoundsTheBacklog(t *testing.T) {
	srv := testServer(t)
	cfg := &config{srv: srv, pool: 8, concurrency: 8,
		riverFetchCooldown: time.Millisecond, riverFetchPoll: 10 * time.Millisecond}
	for _, sys := range []struct {
		name string
		open sustainedOpen
	}{{"cairnq", sustainedCairnq}, {"river", sustainedRiver}} {
		t.Run(sys.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			c, err := sustainedCapacity(context.Background(), cfg, sys.open, 200*time.Millisecond, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c.started <= 0 || c.submitted <= 0 {
				t.Fatalf("counted %d submitted and %d started, want both positive", c.submitted, c.started)
			}
			// The counts may differ by what was in flight at the window's
			// two ends (each at most the room, submits in progress
			// included) and the submits that returned between the two
			// reads that open it; unbounded, the submits ran thousands
			// ahead.
			room := int64(2 * cfg.concurrency)
			if d := c.submitted - c.started; d > 2*room+64 || -d > 2*room+64 {
				t.Errorf("%d submitted and %d started in the window: the backlog was not held to %d", c.submitted, c.started, room)
			}
			if got, want := c.rate(), float64(c.started)/time.Second.Seconds(); got != want {
				t.Errorf("rate %.1f, want the starts per second, %.1f", got, want)
			}
			// The goroutines of a closed pool or client may take a moment
			// to return.
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines after the measurement, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// The controls each commit on a connection of their own until stopped,
// the notifying one sending a NOTIFY with every commit, and leave no
// goroutine behind.
func TestControlsCommitUntilStopped(t *testing.T) {
	ctx := context.Background()
	db := freshDB(t, testServer(t), "controls")
	before := runtime.NumGoroutine()
	cs, err := startControls(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN bench_control"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := listener.WaitForNotification(wctx); err != nil {
		t.Fatalf("no notification from the notifying control: %v", err)
	}
	counts := make([]int, len(cs.all))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(controlEvery) {
		done := true
		for i, c := range cs.all {
			counts[i] += len(c.commits.take().ds)
			done = done && counts[i] >= 3
		}
		if done {
			break
		}
	}
	cs.stop()
	cs.stop() // a second stop is harmless
	for i, c := range cs.all {
		if counts[i] < 3 {
			t.Errorf("%s recorded %d commits, want at least 3", c.name, counts[i])
		}
	}
	var rows int
	if err := listener.QueryRow(ctx, "SELECT count(*) FROM bench_control").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < counts[0]+counts[1] {
		t.Errorf("%d rows committed, %d commits recorded", rows, counts[0]+counts[1])
	}
	listener.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after stop, %d before", n, before)
	}
}

// A pickup whose wait overlapped a control's stall is set aside, one
// that waited before or after it is kept, and only commits of
// slowPickup or longer are stalls.
func TestPickupsOutsideTheControlsStalls(t *testing.T) {
	at := func(n int64) int64 { return n * int64(time.Millisecond) }
	ctl := batch{
		ds:   []time.Duration{5 * time.Millisecond, 150 * time.Millisecond, slowPickup - 1},
		ends: []int64{at(100), at(1150), at(2000)},
	}
	stalls := ctl.stalls()
	if want := []span{{at(1000), at(1150)}}; !slices.Equal(stalls, want) {
		t.Fatalf("stalls %v, want %v", stalls, want)
	}
	picks := batch{
		ds: []time.Duration{
			10 * time.Millisecond,  // 980-990: before the stall
			30 * time.Millisecond,  // 990-1020: into it
			300 * time.Millisecond, // 900-1200: through it
			20 * time.Millisecond,  // 1140-1160: out of it
			10 * time.Millisecond,  // 1150-1160: from its end
		},
		ends: []int64{at(990), at(1020), at(1200), at(1160), at(1160)},
	}
	kept, setAside := picks.outside(stalls)
	if want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}; !slices.Equal(kept, want) || setAside != 3 {
		t.Errorf("kept %v, %d set aside; want %v, 3", kept, setAside, want)
	}
	if kept, setAside := picks.outside(nil); len(kept) != len(picks.ds) || setAside != 0 {
		t.Errorf("with no stalls: kept %d, %d set aside", len(kept), setAside)
	}
}

// The verdict prints the stall-aware line beside the plain one, each
// against its own first minutes.
func TestPrintSustainedSetsAsideStalls(t *testing.T) {
	var samples []sustainedSample
	for i := range 6 {
		s := sustainedSample{phase: "steady", ran: 1000, p99: 10 * time.Millisecond, calmP99: 8 * time.Millisecond}
		if i == 5 {
			s.p99, s.setAside = 50*time.Millisecond, 20
		}
		samples = append(samples, s)
	}
	var out strings.Builder
	printSustained(&out, "x", 100, samples)
	for _, want := range []string{
		"worst of the second half 50.00ms (5.00x)",
		"outside the controls' stalls: p99 of the first 3 samples (median) 8.00ms, worst of the second half 8.00ms (1.00x); 20 of 6000 steady pickups set aside (0.33%)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verdict lacks %q:\n%s", want, out.String())
		}
	}
}

// --sustained-seconds writes one line per wall-clock second of a batch's
// pickups, in order of the second, so slow seconds can be set beside the
// server's log; a second sample appends rather than overwrites.
func TestAppendSecondsOneLinePerSecond(t *testing.T) {
	path := t.TempDir() + "/seconds"
	at := func(sec int64, ms int64) int64 { return time.Unix(sec, ms*int64(time.Millisecond)).UnixNano() }
	b := batch{
		ds:   []time.Duration{40 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond},
		ends: []int64{at(1_000_061, 900), at(1_000_060, 100), at(1_000_060, 200), at(1_000_060, 300)},
	}
	if err := appendSeconds(path, "cairnq", "steady", b); err != nil {
		t.Fatal(err)
	}
	if err := appendSeconds(path, "cairnq", "hold", batch{ds: []time.Duration{time.Second}, ends: []int64{at(1_000_062, 0)}}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "cairnq steady 13:47:40 3 3.0 5.0 5.0\n" +
		"cairnq steady 13:47:41 1 40.0 40.0 40.0\n" +
		"cairnq hold 13:47:42 1 1000.0 1000.0 1000.0\n"
	if string(got) != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
}

// The sustained run keeps what each taken submit took, for the sample's
// "submits took" line; a failed submit and the capacity measurement's
// untimed load keep nothing.
func TestLoadKeepsWhatTakenSubmitsTook(t *testing.T) {
	fail := false
	sys := &sustainedSystem{submit: func(context.Context) error {
		if fail {
			return context.DeadlineExceeded
		}
		return nil
	}}
	l := load{timed: true}
	for range 3 {
		l.submit(context.Background(), sys)
	}
	fail = true
	l.submit(context.Background(), sys)
	if got := len(l.takeSubmits()); got != 3 {
		t.Errorf("kept %d durations, want the 3 taken submits'", got)
	}
	if got := len(l.takeSubmits()); got != 0 {
		t.Errorf("a second take returned %d durations, want none", got)
	}
	if l.submitted.Load() != 3 || l.failed.Load() != 1 {
		t.Errorf("submitted %d failed %d, want 3 and 1", l.submitted.Load(), l.failed.Load())
	}
	var untimed load
	fail = false
	untimed.submit(context.Background(), sys)
	if got := len(untimed.takeSubmits()); got != 0 {
		t.Errorf("an untimed load kept %d durations", got)
	}
}
