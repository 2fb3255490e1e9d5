package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/riverqueue/river"

	cairnq "github.com/cairnq/cairnq-go"
)

// The many benchmark: --submit-n unkeyed no-op tasks written in batches
// of --many-batch from one goroutine, cairnq's SubmitMany through pgx
// against River's InsertMany, interleaved per run (issue 30's target:
// SubmitMany at 1.2x InsertMany or better).

// manyResult is one run of one system.
type manyResult struct {
	system  string
	run, n  int
	elapsed time.Duration
}

func (r manyResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// batchLoop calls fn with batch sizes summing to n and returns the time.
func batchLoop(ctx context.Context, n, batch int, fn func(ctx context.Context, size int) error) (time.Duration, error) {
	start := time.Now()
	for done := 0; done < n; done += batch {
		if err := fn(ctx, min(batch, n-done)); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func cairnqSubmitMany(ctx context.Context, cfg *config, run int) (manyResult, error) {
	a, err := pickAdapters("pgx")
	if err != nil {
		return manyResult{}, err
	}
	db, err := cfg.srv.FreshDatabase(ctx, "cqmany")
	if err != nil {
		return manyResult{}, err
	}
	defer db.Drop()
	c, closeC, err := openClient(ctx, cfg, a[0], db.DSN, true, nil)
	if err != nil {
		return manyResult{}, err
	}
	defer closeC()
	items := make([]cairnq.SubmitItem, cfg.manyBatch)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: noopName}
	}
	elapsed, err := batchLoop(ctx, cfg.submitN, cfg.manyBatch, func(ctx context.Context, size int) error {
		_, err := c.SubmitMany(ctx, items[:size])
		return err
	})
	if err != nil {
		return manyResult{}, fmt.Errorf("pgx: SubmitMany: %w", err)
	}
	return manyResult{system: "cairnq", run: run, n: cfg.submitN, elapsed: elapsed}, nil
}

func riverInsertMany(ctx context.Context, cfg *config, run int) (manyResult, error) {
	client, _, closeFn, err := riverInserter(ctx, cfg, "rivermany")
	if err != nil {
		return manyResult{}, err
	}
	defer closeFn()
	params := make([]river.InsertManyParams, cfg.manyBatch)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	elapsed, err := batchLoop(ctx, cfg.submitN, cfg.manyBatch, func(ctx context.Context, size int) error {
		_, err := client.InsertMany(ctx, params[:size])
		return err
	})
	if err != nil {
		return manyResult{}, fmt.Errorf("river InsertMany: %w", err)
	}
	return manyResult{system: "river", run: run, n: cfg.submitN, elapsed: elapsed}, nil
}

// benchMany interleaves the two systems within each run and prints each
// run's rates and their ratio, then the medians.
func benchMany(ctx context.Context, cfg *config, rep *report) {
	var ours, theirs, ratios []float64
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		c, err := cairnqSubmitMany(ctx, cfg, run)
		if err != nil {
			rep.fail(fmt.Sprintf("many run %d cairnq", run), err)
			continue
		}
		fmt.Printf("  many run %d cairnq SubmitMany       %8.0f tasks/s  (%d in %v)\n", run, c.rate(), c.n, c.elapsed.Round(time.Millisecond))
		if cfg.noRiver {
			ours = append(ours, c.rate())
			continue
		}
		r, err := riverInsertMany(ctx, cfg, run)
		if err != nil {
			rep.fail(fmt.Sprintf("many run %d river", run), err)
			continue
		}
		fmt.Printf("  many run %d River InsertMany       %8.0f tasks/s  (%d in %v)\n", run, r.rate(), r.n, r.elapsed.Round(time.Millisecond))
		ours, theirs, ratios = append(ours, c.rate()), append(theirs, r.rate()), append(ratios, c.rate()/r.rate())
	}
	if len(ours) == 0 {
		return
	}
	fmt.Printf("\n== Batched submit: %d no-op tasks in batches of %d, one goroutine (tasks/s) ==\n", cfg.submitN, cfg.manyBatch)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\truns\tmedian\t")
	fmt.Fprintf(tw, "cairnq pgx SubmitMany\t%s\t%.0f\t\n", joinRates(ours), median(ours))
	if len(theirs) > 0 {
		fmt.Fprintf(tw, "River %s InsertMany\t%s\t%.0f\t\n", riverVersion, joinRates(theirs), median(theirs))
	}
	tw.Flush()
	if len(ratios) > 0 {
		fmt.Printf("SubmitMany / InsertMany, median of the runs' ratios: %.2fx\n\n", median(ratios))
	}
}
