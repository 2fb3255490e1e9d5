package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/store"
)

// cmdDemo submits sample tasks to a fresh database and runs them.
func cmdDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("demo", out)
	db := fs.String("db", "cairnq-demo.db", "SQLite file to create (replaced if it exists)")
	n := fs.Int("n", 300, "tasks to submit")
	conc := fs.Int("concurrency", 8, "tasks run at once")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *n < 1 || *conc < 1 {
		return fmt.Errorf("%w: --n and --concurrency must be >= 1", errUsage)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(*db + suffix); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	c, err := cairnq.Open(ctx, *db, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	abs, _ := filepath.Abs(*db)
	fmt.Fprintf(out, "cairnq demo: %d tasks on %s\n", *n, abs)

	start := time.Now()
	for i := range *n {
		name, queue := "render", "default"
		if i%3 == 0 {
			name, queue = "embed", "gpu"
		}
		if _, err := c.Submit(ctx, name, map[string]int{"n": i}, &cairnq.SubmitOptions{Queue: queue}); err != nil {
			return err
		}
	}
	st := c.Store()
	var wg sync.WaitGroup
	errs := make(chan error, *conc)
	for w := range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("demo-%d", w)
			for {
				got, err := st.Claim(ctx, store.ClaimParams{Queues: []string{"default", "gpu"}, WorkerID: worker})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				if _, err := st.Complete(ctx, got[0].ID, worker, map[string]bool{"ok": true}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	elapsed := time.Since(start)
	stats, err := c.Stats(ctx, "")
	if err != nil {
		return err
	}
	printStats(out, stats)
	fmt.Fprintf(out, "%d tasks submitted and run in %v (%.0f tasks/s)\n", *n, elapsed.Round(time.Millisecond), float64(*n)/elapsed.Seconds())
	return nil
}
