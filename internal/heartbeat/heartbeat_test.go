package heartbeat

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// lease records what the beats told it.
type lease struct {
	id string

	mu       sync.Mutex
	renewed  int
	canceled bool
	missed   bool
}

func (l *lease) ID() string { return l.id }
func (l *lease) Renewed(cancel bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewed++
	l.canceled = l.canceled || cancel
}
func (l *lease) Missed() { l.mu.Lock(); l.missed = true; l.mu.Unlock() }

func (l *lease) state() (renewed int, canceled, missed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed, l.canceled, l.missed
}

// Beats renew every held lease in one statement: a task still running
// keeps its lease past its first term and hears a cancel requested of
// it; a task settled meanwhile is missed, alone.
func TestBeatRenewsWhatIsHeld(t *testing.T) {
	s, err := engine.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, stop := context.WithCancel(t.Context())
	for range 3 {
		if _, err := s.Submit(ctx, engine.SubmitParams{Name: "work"}); err != nil {
			t.Fatal(err)
		}
	}
	const term = time.Second
	got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w1", Limit: 3, Lease: term})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	running, canceled, settled := &lease{id: got[0].ID}, &lease{id: got[1].ID}, &lease{id: got[2].ID}
	if _, err := s.Cancel(ctx, canceled.id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, settled.id, "w1", nil); err != nil {
		t.Fatal(err)
	}
	var reported []error
	b := &Beat{Store: s, WorkerID: "w1", Every: 20 * time.Millisecond, Lease: term, Rows: &sync.Mutex{},
		Held:   func() []Lease { return []Lease{running, canceled, settled} },
		Report: func(err error, _ string) { reported = append(reported, err) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for {
		n, _, _ := running.state()
		_, cancel, _ := canceled.state()
		_, _, missed := settled.state()
		if n >= 2 && cancel && missed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after beats: running renewed %d times, cancel heard %v, settled missed %v", n, cancel, missed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	if _, cancel, missed := running.state(); cancel || missed {
		t.Fatalf("the running task heard cancel %v, missed %v; want neither", cancel, missed)
	}
	row, err := s.Get(t.Context(), running.id)
	if err != nil {
		t.Fatal(err)
	}
	if !row.LeaseUntil.After(got[0].LeaseUntil) {
		t.Fatalf("lease until %v after beats, want past the claim's %v", row.LeaseUntil, got[0].LeaseUntil)
	}
	if len(reported) != 0 {
		t.Fatalf("beats reported %v", reported)
	}
}
