package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// keepAlive is how often an idle event stream sends a comment, so proxies
// keep it open and a vanished client is noticed.
const keepAlive = 15 * time.Second

// events streams a "change" event whenever tasks may have changed, fed by
// Client.Watch. The watch and its goroutine belong to the request: they stop
// when the client goes away or the server shuts the request down.
func (k *console) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	ctx := r.Context()
	// Subscribe before the stream opens: the page's EventSource counts as
	// connected once the first bytes arrive, so a change landing before
	// the watch listened would show only at the next poll.
	signals := make(chan cairnq.Signal, 1)
	stop := k.c.Watch(ctx, &cairnq.WatchOptions{PollInterval: k.opts.PollInterval}, func(s cairnq.Signal) {
		select {
		case signals <- s:
		default: // one pending event already says "re-read"
		}
	})
	defer stop()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Tell the browser how long to wait before reconnecting, and open with
	// a change: what moved between the page's render (or a dropped
	// stream) and this subscription is re-read now.
	fmt.Fprintf(w, "retry: 2000\n: cairnq console\n\nevent: change\ndata: {\"reason\":\"connected\"}\n\n")
	if err := rc.Flush(); err != nil {
		return // the writer cannot stream
	}

	// The overview's stream also says when a background count found other
	// numbers (?counts=1). It only listens: the count runs for requests.
	var counted <-chan struct{}
	if r.URL.Query().Get("counts") == "1" {
		counted = k.counter.changes()
	}

	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-counted:
			counted = k.counter.changes()
			if _, err := fmt.Fprint(w, "event: change\ndata: {\"reason\":\"counted\"}\n\n"); err != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case s := <-signals:
			b, _ := json.Marshal(map[string]string{"reason": s.Reason, "queue": s.Queue, "task_id": s.TaskID})
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", b); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
