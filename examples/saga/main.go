// Command saga books a trip as a workflow of three steps, each waiting
// for the one before: reserve a flight, reserve a hotel, charge the card.
// The card is declined, for good: the workflow fails and submits nothing
// after the charge. The program then runs the saga's compensations for
// the steps that did succeed, latest first, as a second workflow (cancel
// the hotel, then the flight), each reading the reservation to undo from
// the result of the step it compensates. It checks that no reservation
// is left, and that the releases ran latest first.
//
// It runs on a SQLite file in a temporary directory, or on Postgres when
// DATABASE_URL is set:
//
//	go run ./examples/saga
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/saga
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// queue keeps this example's tasks apart from the other examples'.
const queue = "saga"

// Trip is what every forward step is given.
type Trip struct {
	Traveler string `json:"traveler"`
	From     string `json:"from"`
	To       string `json:"to"`
	Card     string `json:"card"`
	Amount   int    `json:"amount"` // cents
}

// Reservation is a forward step's result, and what its compensation
// undoes.
type Reservation struct {
	Kind string `json:"kind"` // flight or hotel
	ID   string `json:"id"`
}

// The forward steps and their compensations.
var (
	reserveFlight = cairnq.Define[Trip, Reservation]("trip.reserve_flight")
	reserveHotel  = cairnq.Define[Trip, Reservation]("trip.reserve_hotel")
	charge        = cairnq.Define[Trip, string]("trip.charge")
	release       = cairnq.Define[Reservation, string]("trip.release")
)

// compensation says which forward step is undone by what.
var compensation = map[string]string{"flight": "release-flight", "hotel": "release-hotel"}

// bookings stands in for the airline's and the hotel's systems.
type bookings struct {
	mu       sync.Mutex
	held     map[string]Reservation
	n        int
	released []string
}

func (b *bookings) reserve(kind string) Reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	r := Reservation{Kind: kind, ID: fmt.Sprintf("%s-%03d", kind, b.n)}
	b.held[r.ID] = r
	return r
}

func (b *bookings) release(r Reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.held[r.ID]; ok { // twice is once: a retried release is harmless
		delete(b.held, r.ID)
		b.released = append(b.released, r.ID)
	}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "saga: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("saga: ok")
}

// open opens a client on DATABASE_URL's Postgres database, or on a fresh
// SQLite file when it is unset.
func open(ctx context.Context) (*cairnq.Client, func(), error) {
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		ex, err := cairnqpgx.Open(ctx, dsn, nil)
		if err != nil {
			return nil, nil, err
		}
		c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			ex.Close()
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "saga-")
	if err != nil {
		return nil, nil, err
	}
	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return c, func() { c.Close(); os.RemoveAll(dir) }, nil
}

func run(ctx context.Context) error {
	c, closeClient, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	b := &bookings{held: map[string]Reservation{}}

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{queue}, Concurrency: 2})
	if err != nil {
		return err
	}
	err = errors.Join(
		reserveFlight.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, t Trip) (Reservation, error) {
			return b.reserve("flight"), nil
		}, nil),
		reserveHotel.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, t Trip) (Reservation, error) {
			return b.reserve("hotel"), nil
		}, nil),
		charge.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, t Trip) (string, error) {
			// Declined is an answer, not an outage: retrying cannot help.
			return "", &cairnq.TaskError{Type: "CardDeclined", Code: "card_declined", Retryable: false,
				Message: fmt.Sprintf("card %s declined for %d cents", t.Card, t.Amount)}
		}, nil),
		release.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, r Reservation) (string, error) {
			b.release(r)
			return "released " + r.ID, nil
		}, nil),
	)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	trip := Trip{Traveler: "Ada", From: "LHR", To: "NRT", Card: "4000-0000-0000-0002", Amount: 182_000}
	on := &cairnq.SubmitOptions{Queue: queue}
	wait := &cairnq.WaitOptions{Timeout: time.Minute}
	_, err = c.CallWorkflow(ctx, []cairnq.WorkflowStep{
		reserveFlight.Step("flight", trip, on),
		reserveHotel.Step("hotel", trip, on, "flight"),
		charge.Step("charge", trip, on, "hotel"),
	}, nil, wait)
	var failed *cairnq.TaskFailedError
	if !errors.As(err, &failed) {
		return fmt.Errorf("booking: %v, want the workflow failed at the charge", err)
	}
	fmt.Printf("booking failed: %s\n", failed.Envelope.Message)

	// The compensations: one per forward step that succeeded, latest
	// first, each waiting for the one before it.
	wf, err := c.GetWorkflow(ctx, failed.ID)
	if err != nil {
		return err
	}
	var undo []cairnq.WorkflowStep
	for _, s := range slices.Backward(wf.Steps) {
		name, ok := compensation[s.Step]
		if !ok || s.State != cairnq.StepState(cairnq.StatusSucceeded) {
			continue
		}
		t, err := c.Get(ctx, s.TaskID)
		if err != nil {
			return err
		}
		var r Reservation
		if err := t.DecodeResult(&r); err != nil {
			return err
		}
		step := release.Step(name, r, on)
		if len(undo) > 0 {
			step.After = []string{undo[len(undo)-1].Step}
		}
		undo = append(undo, step)
		fmt.Printf("compensating %s (%s) with %s\n", s.Step, r.ID, name)
	}
	if _, err := c.CallWorkflow(ctx, undo, nil, wait); err != nil {
		return fmt.Errorf("the compensations: %w", err)
	}
	stop()
	if err := <-runErr; err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.held) != 0 {
		return fmt.Errorf("after the saga: %d reservations still held", len(b.held))
	}
	if want := []string{"hotel-002", "flight-001"}; !slices.Equal(b.released, want) {
		return fmt.Errorf("released %v, want %v (latest first)", b.released, want)
	}
	fmt.Printf("released %v; nothing held\n", b.released)
	return nil
}
