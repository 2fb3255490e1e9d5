package main

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// controlEvery is how often each control commits.
const controlEvery = 20 * time.Millisecond

// A control commits one row into a table of its own, on a connection of
// its own, every controlEvery, and records how long each commit took:
// what any writer of the server waits in that second. Beside a system's
// pickups it tells the server's stalls (its WAL flushes, a vacuum's or a
// checkpoint's I/O) from the system's own. With notify, each commit also
// sends a NOTIFY and so queues on the lock every notifying commit takes
// until its commit record is flushed, as cairnq's submits and settlements
// do through the protocol's trigger.
type control struct {
	name    string
	notify  bool
	commits pickups
}

// controls runs its controls until stop.
type controls struct {
	all    []*control
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startControls creates the controls' table in dsn's database and starts
// a plain control and a notifying one, each on a connection of its own.
func startControls(ctx context.Context, dsn string) (*controls, error) {
	setup, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	_, err = setup.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_control (id bigserial PRIMARY KEY, at timestamptz NOT NULL)")
	_ = setup.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cs := &controls{cancel: cancel}
	for _, c := range []*control{{name: "control"}, {name: "control+notify", notify: true}} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			cs.stop()
			return nil, err
		}
		cs.all = append(cs.all, c)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			defer conn.Close(context.WithoutCancel(runCtx))
			c.run(runCtx, conn)
		}()
	}
	return cs, nil
}

// stop stops the controls and waits for them; safe to repeat.
func (cs *controls) stop() {
	cs.cancel()
	cs.wg.Wait()
}

func (c *control) run(ctx context.Context, conn *pgx.Conn) {
	q := "INSERT INTO bench_control (at) VALUES (now())"
	if c.notify {
		q = "INSERT INTO bench_control (at) SELECT now() FROM (SELECT pg_notify('bench_control', '')) AS n"
	}
	tick := time.NewTicker(controlEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		if _, err := conn.Exec(ctx, q); err != nil {
			return // the context ended, or the server went: the samples show the gap
		}
		c.commits.add(time.Since(start))
	}
}
