// Command payment-saga runs a checkout as one durable handler: it charges
// the card, waits for a human approval event (refunding when none comes
// in time), sleeps through a cool-off, then ships. Each step's output is
// recorded in the task's own row, so the wait and the sleep park the task
// without holding a worker slot, and every later attempt (on this
// process or another) resumes after the steps that finished: the card is
// charged once, whatever happens after.
//
// Three orders run. An operator approves the first while it waits (from
// here with Client.SendEventByKey; from a shell, `cairnq event send
// --key order-1 approval '{"by":"ops","approved":true}'`). The second's
// approval never comes, so it is refunded when its wait times out, and
// a late approval is refused. The third's checkout is the first step of
// a workflow, approved through its step's key, after which the workflow
// mails a receipt. The program checks that each card was charged exactly
// once, that the refunded order was never shipped, and that a worker of
// one slot charged two orders while the first waited.
//
// It runs on a SQLite file in a temporary directory, or on Postgres when
// DATABASE_URL is set:
//
//	go run ./examples/payment-saga
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/payment-saga
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// queue keeps this example's tasks apart from the other examples'.
const queue = "payment-saga"

// Order is the checkout task's payload.
type Order struct {
	ID       string        `json:"id"`
	Card     string        `json:"card"`
	Amount   int           `json:"amount"`   // cents
	Approval time.Duration `json:"approval"` // how long to wait for a human
}

// Approval is the approval event's payload.
type Approval struct {
	By       string `json:"by"`
	Approved bool   `json:"approved"`
}

// payments stands in for the payment provider and the warehouse: what
// each order was charged, refunded and shipped, counted, so the program
// can check that nothing happened twice.
type payments struct {
	mu                         sync.Mutex
	charged, refunded, shipped map[string]int
}

func (p *payments) record(what map[string]int, order string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	what[order]++
	return fmt.Sprintf("%s-%d", order, what[order])
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "payment-saga: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("payment-saga: ok")
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
	dir, err := os.MkdirTemp("", "payment-saga-")
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

// checkout is the durable handler: charge, wait for approval (refund
// when it is refused or never comes), cool off, ship.
func (p *payments) checkout(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
	var o Order
	if err := tc.Decode(&o); err != nil {
		return nil, cairnq.Permanent(err)
	}
	receipt, err := cairnq.Once(ctx, tc, "charge", func(ctx context.Context) (string, error) {
		return p.record(p.charged, o.ID), nil // a real provider takes tc.ID()+"/charge" as its idempotency key
	})
	if err != nil {
		return nil, err
	}
	approval, err := cairnq.WaitEvent[Approval](ctx, tc, "approval", o.Approval)
	if err != nil {
		return nil, err // parked: the task waits without a slot, and this attempt ends here
	}
	if approval.TimedOut || !approval.Payload.Approved {
		refund, err := cairnq.Once(ctx, tc, "refund", func(ctx context.Context) (string, error) {
			return p.record(p.refunded, o.ID), nil
		})
		return "refunded " + receipt + " as " + refund, err
	}
	if err := cairnq.Sleep(ctx, tc, "cool-off", 200*time.Millisecond); err != nil {
		return nil, err // a day, in real life: the task sleeps in the database
	}
	label, err := cairnq.Once(ctx, tc, "ship", func(ctx context.Context) (string, error) {
		return p.record(p.shipped, o.ID), nil
	})
	return fmt.Sprintf("shipped %s, charged %s, approved by %s", label, receipt, approval.Payload.By), err
}

func run(ctx context.Context) error {
	c, closeClient, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeClient()
	p := &payments{charged: map[string]int{}, refunded: map[string]int{}, shipped: map[string]int{}}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{queue}, Concurrency: 1})
	if err != nil {
		return err
	}
	if err := w.Handle("order.checkout", p.checkout, nil); err != nil {
		return err
	}
	if err := w.Handle("order.receipt", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		checkout, err := cairnq.StepResult[string](ctx, tc, "checkout")
		return "mailed a receipt: " + checkout, err
	}, nil); err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()
	defer func() { stop(); <-stopped }()

	orders := []Order{
		{ID: "order-1", Card: "4242", Amount: 4200, Approval: time.Hour},
		{ID: "order-2", Card: "4000", Amount: 1900, Approval: 500 * time.Millisecond},
	}
	ids := map[string]string{}
	for _, o := range orders {
		t, err := c.Submit(ctx, "order.checkout", o, &cairnq.SubmitOptions{Queue: queue, Key: o.ID})
		if err != nil {
			return err
		}
		ids[o.ID] = t.ID
	}
	// On a worker of one slot, both orders are charged: whichever ran
	// first gave the slot back when it parked in its wait.
	if err := waitUntil(ctx, func() (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.charged) == len(orders), nil
	}); err != nil {
		return fmt.Errorf("waiting for both orders to be charged: %w", err)
	}
	fmt.Println("both orders charged on a worker of one slot: a waiting order holds none")

	if err := c.SendEventByKey(ctx, "order-1", "approval", Approval{By: "ops", Approved: true}); err != nil {
		return err
	}
	for _, o := range orders {
		t, err := c.Wait(ctx, ids[o.ID], &cairnq.WaitOptions{Timeout: time.Minute})
		if err != nil {
			return fmt.Errorf("%s: %w", o.ID, err)
		}
		fmt.Printf("%s: %s %s (attempt %d)\n", o.ID, t.Status, t.Result, t.Attempt)
	}
	// Too late for order-2: it was refunded when its wait timed out, and
	// what a wait decided holds.
	var refused *cairnq.EventRefusedError
	if err := c.SendEventByKey(ctx, "order-2", "approval", Approval{By: "ops", Approved: true}); !errors.As(err, &refused) {
		return fmt.Errorf("a late approval: %v, want it refused", err)
	}
	fmt.Println("a late approval of order-2:", refused)

	// A workflow's step may wait for a human too: order-3's checkout is
	// the first step of a workflow, and the receipt waits for it. The
	// approval goes to the step's task, by its key.
	o3 := Order{ID: "order-3", Card: "5555", Amount: 700, Approval: time.Hour}
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "checkout", Task: "order.checkout", Payload: o3, Options: &cairnq.SubmitOptions{Queue: queue}},
		{Step: "receipt", Task: "order.receipt", Options: &cairnq.SubmitOptions{Queue: queue}, After: []string{"checkout"}},
	}, nil)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, func() (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.charged[o3.ID] == 1, nil
	}); err != nil {
		return fmt.Errorf("waiting for order-3 to be charged: %w", err)
	}
	if err := c.SendEventByKey(ctx, cairnq.StepKey(rec.ID, "checkout"), "approval", Approval{By: "finance", Approved: true}); err != nil {
		return err
	}
	if _, err := c.Wait(ctx, rec.ID, &cairnq.WaitOptions{Timeout: time.Minute}); err != nil {
		return fmt.Errorf("order-3's workflow: %w", err)
	}
	receipt, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "receipt"))
	if err != nil {
		return err
	}
	fmt.Printf("order-3 (a workflow's step): %s\n", receipt.Result)

	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf("charged %v, refunded %v, shipped %v\n", p.charged, p.refunded, p.shipped)
	switch {
	case p.charged["order-1"] != 1 || p.charged["order-2"] != 1:
		return errors.New("a card was charged more than once")
	case p.shipped["order-1"] != 1 || p.refunded["order-1"] != 0:
		return errors.New("order-1 was not shipped once and never refunded")
	case p.refunded["order-2"] != 1 || p.shipped["order-2"] != 0:
		return errors.New("order-2 was not refunded once and never shipped")
	case p.charged["order-3"] != 1 || p.shipped["order-3"] != 1:
		return errors.New("order-3 was not charged and shipped once")
	}
	return nil
}

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
