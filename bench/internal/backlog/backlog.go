// Package backlog fills a benchmark's database with no-op tasks before its
// timed part: in batches from several goroutines, so that the setup costs
// a few commits rather than one per task.
package backlog

import (
	"context"
	"sync"
	"sync/atomic"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// Fill calls submit for n tasks in batches of at most per, from g
// goroutines, and returns the first error (the goroutines that meet one
// stop; the others finish their batches).
func Fill(n, per, g int, submit func(count int) error) error {
	batches := (n + per - 1) / per
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1)) - 1
				if b >= batches {
					return
				}
				if err := submit(min(per, n-b*per)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// InTx submits count tasks named name, without payload, in one
// transaction of ex through c.SubmitTx: the same tasks Submit makes.
func InTx(ctx context.Context, c *cairnq.Client, ex executor.Executor, name string, count int) error {
	return ex.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		for range count {
			if _, err := c.SubmitTx(ctx, s, name, nil, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
