package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
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
// sends a NOTIFY and so queues on the lock every notifying commit of the
// cluster takes until its commit record is flushed, as cairnq's submits
// and settlements do through the protocol's trigger. The controls work in
// a database of their own, so that no listener of the system's is woken
// by their notifications.
type control struct {
	name     string
	notify   bool
	commits  pickups
	inFlight atomic.Int64 // when the commit under way started, Unix ns; 0 between commits
	errs     atomic.Int64 // failed commits and connections, each followed by a reconnect
}

// stalled is how long the commit under way has waited, 0 if none is.
func (c *control) stalled() time.Duration {
	if at := c.inFlight.Load(); at != 0 {
		return time.Since(time.Unix(0, at))
	}
	return 0
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
		cs.all = append(cs.all, c)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			c.run(runCtx, dsn)
		}()
	}
	return cs, nil
}

// stop stops the controls and waits for them; safe to repeat.
func (cs *controls) stop() {
	cs.cancel()
	cs.wg.Wait()
}

// run commits every controlEvery until ctx ends, connecting again (once a
// second at most) whenever a commit or a connection fails.
func (c *control) run(ctx context.Context, dsn string) {
	q := "INSERT INTO bench_control (at) VALUES (now())"
	if c.notify {
		q = "INSERT INTO bench_control (at) SELECT now() FROM (SELECT pg_notify('bench_control', '')) AS n"
	}
	tick := time.NewTicker(controlEvery)
	defer tick.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil {
			if time.Now().Before(retryAt) {
				continue
			}
			var err error
			if conn, err = pgx.Connect(ctx, dsn); err != nil {
				c.fail(ctx, err)
				retryAt = time.Now().Add(time.Second)
				continue
			}
		}
		start := time.Now()
		c.inFlight.Store(start.UnixNano())
		_, err := conn.Exec(ctx, q)
		c.inFlight.Store(0)
		if err != nil {
			c.fail(ctx, err)
			_ = conn.Close(context.WithoutCancel(ctx))
			conn, retryAt = nil, time.Now().Add(time.Second)
			continue
		}
		c.commits.add(time.Since(start))
	}
}

// fail counts and logs a failed commit or connection, unless the
// controls are stopping.
func (c *control) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	c.errs.Add(1)
	slog.Warn("sustained: a control's commit failed; connecting again", "control", c.name, "err", err)
}
