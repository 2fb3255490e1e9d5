package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

type event struct {
	Name string
	Data map[string]string
}

// stream opens /events on srv and returns its events until ctx ends.
func stream(t *testing.T, ctx context.Context, srv *httptest.Server) <-chan event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/cairnq/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan event, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data)
			case line == "" && ev.Name != "":
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				ev = event{}
			}
		}
	}()
	return out
}

// next returns the first event matching ok within 20s.
func next(t *testing.T, evs <-chan event, ok func(event) bool) event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, open := <-evs:
			if !open {
				t.Fatal("event stream ended")
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching event")
		}
	}
}

// serve mounts the console over c on a real server, and reports when each
// request's handler has returned.
func serve(t *testing.T, c *cairnq.Client, o *console.Options) (*httptest.Server, <-chan struct{}) {
	h := mount(t, c, o)
	returned := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, returned
}

func TestEventsFromAnotherClient(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c, other := open(t), open(t)
		poll := time.Hour // Postgres: the event must come from LISTEN
		if strings.HasSuffix(t.Name(), "sqlite") {
			poll = 100 * time.Millisecond // across processes SQLite names no queue: "changed", or the timer
		}
		srv, returned := serve(t, c, &console.Options{PollInterval: poll})
		sctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		evs := stream(t, sctx, srv)
		time.Sleep(200 * time.Millisecond) // let the watch subscribe
		submit(t, other, "from-elsewhere", nil, &cairnq.SubmitOptions{Queue: "elsewhere"})
		ev := next(t, evs, func(ev event) bool {
			return ev.Name == "change" && (ev.Data["queue"] == "elsewhere" || ev.Data["reason"] == "changed" || ev.Data["reason"] == "poll")
		})
		if poll == time.Hour && (ev.Data["reason"] != "queued" || ev.Data["queue"] != "elsewhere") {
			t.Fatalf("event %+v", ev)
		}
		// The request's goroutines end with it.
		cancel()
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			t.Fatal("the events handler did not return after the client left")
		}
	})
}

func TestEventsInProcess(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		srv, _ := serve(t, c, &console.Options{PollInterval: time.Hour})
		sctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		evs := stream(t, sctx, srv)
		time.Sleep(100 * time.Millisecond)
		task := submit(t, c, "here", nil, &cairnq.SubmitOptions{Queue: "local"})
		next(t, evs, func(ev event) bool { return ev.Data["reason"] == "queued" && ev.Data["queue"] == "local" })
		if _, err := c.Cancel(ctx(t), task.ID); err != nil {
			t.Fatal(err)
		}
		next(t, evs, func(ev event) bool { return ev.Data["reason"] == "done" && ev.Data["task_id"] == task.ID })
	})
}

// TestProgressMovesLive: what a page re-reads on an event shows the
// handler's latest progress.
func TestProgressMovesLive(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		step := make(chan float64)
		task := submit(t, c, "long", nil, nil)
		runWorker(t, c, map[string]cairnq.Handler{"long": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			for f := range step {
				tc.Report(ctx, f, "working")
			}
			return nil, nil
		}})
		h := mount(t, c, nil)
		frag := map[string]string{"X-Cairnq-Fragment": "1"}
		for _, f := range []float64{0.1, 0.6} {
			step <- f
			v := map[float64]string{0.1: `value="0.1"`, 0.6: `value="0.6"`}[f]
			waitFor(t, "progress "+v, func() bool {
				return strings.Contains(do(t, h, "GET", "/cairnq/tasks/"+task.ID, nil, frag).Body, v)
			})
		}
		close(step)
		c.Wait(ctx(t), task.ID, nil)
	})
}
