package main

import (
	"context"
	"fmt"
	"io"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// cmdWatch prints the queue counts whenever they may have changed: on a
// change made by this process, on Postgres through LISTEN, and on the poll
// timer. It runs until interrupted, or for --for.
func cmdWatch(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("watch", out)
	queue := fs.String("queue", "", "only this queue")
	poll := fs.Duration("poll", time.Second, "how often to re-read without a signal")
	limit := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	if *limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *limit)
		defer cancel()
	}
	var queues []string
	if *queue != "" {
		queues = []string{*queue}
	}
	show := func(reason string) {
		stats, err := c.Stats(ctx, *queue)
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(out, "cairnq: watch:", err)
			}
			return
		}
		fmt.Fprintf(out, "%s %-6s", time.Now().Format(time.TimeOnly), reason)
		for q, s := range stats {
			fmt.Fprintf(out, "  %s: %d queued %d running %d succeeded %d failed %d canceled",
				q, s.Queued, s.Running, s.Succeeded, s.Failed, s.Canceled)
		}
		fmt.Fprintln(out)
	}
	show("start")
	stop := c.Watch(ctx, &cairnq.WatchOptions{Queues: queues, PollInterval: *poll}, func(s cairnq.Signal) { show(s.Reason) })
	<-ctx.Done()
	stop()
	return nil
}
