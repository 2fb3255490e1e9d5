package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// workers lists a running Go worker from another process's view, idle,
// with its host and last beat, and says so when none runs.
func TestWorkersCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	if r := ok(t, "workers", "--db", db); r.stdout != "no Go worker is running on this database\n" {
		t.Errorf("workers with none: %q", r.stdout)
	}
	c, err := cairnq.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{ID: "w-cli", Queues: []string{"mail"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("email", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()
	var got struct {
		Workers []struct {
			ID     string   `json:"id"`
			Queues []string `json:"queues"`
			Beat   int64    `json:"beat_at_ms"`
			Silent bool     `json:"silent"`
		} `json:"workers"`
	}
	waitFor(t, "the worker listed", func() bool {
		decode(t, ok(t, "workers", "--db", db, "--json"), &got)
		return len(got.Workers) == 1
	})
	if w := got.Workers[0]; w.ID != "w-cli" || len(w.Queues) != 1 || w.Queues[0] != "mail" || w.Silent || time.Since(time.UnixMilli(w.Beat)) > time.Minute {
		t.Errorf("workers --json = %+v", got.Workers)
	}
	if r := ok(t, "workers", "--db", db); !strings.Contains(r.stdout, "w-cli") || !strings.Contains(r.stdout, "running") || !strings.Contains(r.stdout, "ago") {
		t.Errorf("workers:\n%s", r.stdout)
	}
}

// schedules lists a running scheduler's entries with their next run.
func TestSchedulesCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	if r := ok(t, "schedules", "--db", db); r.stdout != "no periodic schedule has run on this database in the last day\n" {
		t.Errorf("schedules with none: %q", r.stdout)
	}
	c, err := cairnq.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := cairnq.NewScheduler(c, nil)
	if _, err := s.Add("0 3 * * *", "report", nil, &cairnq.ScheduleOptions{ID: "nightly"}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { stop(); <-done }()
	var got struct {
		Schedules []struct {
			ID     string `json:"id"`
			Spec   string `json:"spec"`
			Next   int64  `json:"next_at_ms"`
			Silent bool   `json:"silent"`
		} `json:"schedules"`
	}
	waitFor(t, "the entry listed", func() bool {
		decode(t, ok(t, "schedules", "--db", db, "--json"), &got)
		return len(got.Schedules) == 1
	})
	if e := got.Schedules[0]; e.ID != "nightly" || e.Spec != "0 3 * * *" || e.Silent || time.UnixMilli(e.Next).UTC().Hour() != 3 {
		t.Errorf("schedules --json = %+v", got.Schedules)
	}
	if r := ok(t, "schedules", "--db", db); !strings.Contains(r.stdout, "nightly") || !strings.Contains(r.stdout, "03:00:00 UTC (in ") {
		t.Errorf("schedules:\n%s", r.stdout)
	}
}
