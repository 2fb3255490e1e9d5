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
