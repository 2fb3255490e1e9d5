package console_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// The workers page and the overview list an idle Go worker with its host
// and last beat, beside a worker that holds a lease and writes no beat
// (another SDK's), each in its state.
func TestWorkersPageListsIdleWorkers(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		if _, err := c.Submit(ctx(t), "render", nil, &cairnq.SubmitOptions{Queue: "other-sdk"}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Store().Claim(ctx(t), cairnqtype.ClaimParams{Queues: []string{"other-sdk"}, WorkerID: "ts-worker-1", Lease: time.Minute}); err != nil || len(got) != 1 {
			t.Fatalf("claim as another SDK: %v, %v", got, err)
		}
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{ID: "go-idle", Queues: []string{"mail"}})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("email", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
		wctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		defer func() { stop(); <-done }()

		h := mount(t, c, nil)
		var res struct {
			Workers []struct {
				ID      string
				Host    string
				Running int
				State   string
				BeatAt  *int64 `json:"beat_at_ms"`
				Lease   *int64 `json:"lease_until_ms"`
			}
		}
		waitFor(t, "the idle worker listed", func() bool {
			getJSON(t, h, "/cairnq/api/workers", &res)
			return len(res.Workers) == 2
		})
		host, _ := os.Hostname()
		ts, goW := res.Workers[0], res.Workers[1] // the most running first
		if ts.ID != "ts-worker-1" || ts.Running != 1 || ts.State != "no beat" || ts.BeatAt != nil || ts.Lease == nil {
			t.Errorf("the other SDK's worker: %+v", ts)
		}
		if goW.ID != "go-idle" || goW.Host != host || goW.Running != 0 || goW.State != "running" || goW.BeatAt == nil || goW.Lease != nil {
			t.Errorf("the idle Go worker: %+v", goW)
		}
		for _, page := range []string{"/cairnq/workers", "/cairnq/"} {
			if r := get(t, h, page); !strings.Contains(r.Body, "go-idle") || !strings.Contains(r.Body, host) || !strings.Contains(r.Body, "no beat") {
				t.Errorf("%s lacks the idle worker, its host or the other SDK's state:\n%s", page, r.Body)
			}
		}
	})
}

// The overview lists a running scheduler's entries with their next run,
// in the page and its JSON.
func TestOverviewListsSchedules(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		s := cairnq.NewScheduler(c, nil)
		if _, err := s.Add("0 3 * * *", "report", nil, &cairnq.ScheduleOptions{ID: "nightly"}); err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(sctx) }()
		defer func() { stop(); <-done }()
		h := mount(t, c, nil)
		var ov struct {
			Schedules []struct {
				ID     string
				Spec   string
				NextMs *int64 `json:"next_at_ms"`
				Silent bool
			}
		}
		waitFor(t, "the entry listed", func() bool {
			getJSON(t, h, "/cairnq/api/overview", &ov)
			return len(ov.Schedules) == 1
		})
		if e := ov.Schedules[0]; e.ID != "nightly" || e.Spec != "0 3 * * *" || e.NextMs == nil || time.UnixMilli(*e.NextMs).UTC().Hour() != 3 || e.Silent {
			t.Errorf("the overview's schedule: %+v", e)
		}
		if r := get(t, h, "/cairnq/"); !strings.Contains(r.Body, "Periodic schedules") || !strings.Contains(r.Body, "<code>0 3 * * *</code>") {
			t.Errorf("the overview page lists no schedule:\n%s", r.Body)
		}
	})
}
