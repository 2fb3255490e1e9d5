package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

func open(ctx context.Context, fs *flag.FlagSet, args []string) (*cairnq.Client, error) {
	db := fs.String("db", "tasks.db", "SQLite database file")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return cairnq.Open(ctx, *db, nil)
}

func cmdStats(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("stats", out)
	queue := fs.String("queue", "", "only this queue")
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	stats, err := c.Stats(ctx, *queue)
	if err != nil {
		return err
	}
	printStats(out, stats)
	return nil
}

func printStats(out io.Writer, stats map[string]cairnq.StatusCounts) {
	queues := make([]string, 0, len(stats))
	for q := range stats {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "queue\tqueued\trunning\tsucceeded\tfailed\tcanceled\t")
	for _, q := range queues {
		s := stats[q]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t\n", q, s.Queued, s.Running, s.Succeeded, s.Failed, s.Canceled)
	}
	w.Flush()
}

func cmdList(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("list", out)
	var o cairnq.ListOptions
	fs.Func("status", "only this status", func(s string) error { o.Status = cairnq.Status(s); return nil })
	fs.StringVar(&o.Queue, "queue", "", "only this queue")
	fs.StringVar(&o.Name, "name", "", "only this task name")
	fs.IntVar(&o.Limit, "limit", 20, "at most this many")
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	tasks, err := c.List(ctx, &o)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "id\tname\tqueue\tstatus\tattempt\tcreated")
	for _, t := range tasks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Name, t.Queue, t.Status, t.Attempt, t.MaxAttempts,
			t.CreatedAt.Format(time.DateTime))
	}
	return w.Flush()
}

func oneID(fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%w: %s takes one task id", errUsage, fs.Name())
	}
	return fs.Arg(0), nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdGet(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("get", out)
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := oneID(fs)
	if err != nil {
		return err
	}
	t, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(out, t)
}

func cmdSubmit(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("submit", out)
	var o cairnq.SubmitOptions
	fs.StringVar(&o.Queue, "queue", "", "queue (default \"default\")")
	fs.StringVar(&o.Key, "key", "", "deduplication key")
	fs.IntVar(&o.Priority, "priority", 0, "higher runs first")
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return fmt.Errorf("%w: submit takes NAME [JSON]", errUsage)
	}
	var payload any = map[string]any{}
	if fs.NArg() == 2 {
		if !json.Valid([]byte(fs.Arg(1))) {
			return fmt.Errorf("%w: payload is not valid JSON", errUsage)
		}
		payload = json.RawMessage(fs.Arg(1))
	}
	t, err := c.Submit(ctx, fs.Arg(0), payload, &o)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, t.ID)
	return nil
}

func cmdCancel(ctx context.Context, args []string, out io.Writer) error {
	return settle(ctx, "cancel", args, out, func(c *cairnq.Client, id string) (*cairnq.Task, error) {
		return c.Cancel(ctx, id)
	})
}

func cmdRetry(ctx context.Context, args []string, out io.Writer) error {
	return settle(ctx, "retry", args, out, func(c *cairnq.Client, id string) (*cairnq.Task, error) {
		return c.Retry(ctx, id, nil)
	})
}

func settle(ctx context.Context, name string, args []string, out io.Writer, op func(*cairnq.Client, string) (*cairnq.Task, error)) error {
	fs := newFlags(name, out)
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := oneID(fs)
	if err != nil {
		return err
	}
	t, err := op(c, id)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("%s: no task %s in a state to %s", name, id, name)
	}
	fmt.Fprintf(out, "%s %s\n", t.ID, t.Status)
	return nil
}

func cmdPurge(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("purge", out)
	var o cairnq.PurgeOptions
	fs.DurationVar(&o.OlderThan, "older-than", 24*time.Hour, "keep tasks that finished more recently")
	fs.Func("status", "only this terminal status", func(s string) error { o.Status = cairnq.Status(s); return nil })
	fs.StringVar(&o.Queue, "queue", "", "only this queue")
	c, err := open(ctx, fs, args)
	if err != nil {
		return err
	}
	defer c.Close()
	total := 0
	for {
		ids, err := c.Purge(ctx, &o)
		total += len(ids)
		if err != nil {
			return err
		}
		if len(ids) < 1000 {
			break
		}
	}
	fmt.Fprintf(out, "purged %d tasks\n", total)
	return nil
}
