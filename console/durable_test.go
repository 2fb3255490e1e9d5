package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// A durable handler's task page lists its steps (name, kind, attempt,
// when, output) and its events, says what it is parked in, and redacts
// outputs and payloads with HidePayloads.
func TestTaskPageShowsDurableSteps(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if _, err := cairnq.Once(ctx, tc, "charge", func(context.Context) (string, error) { return "secret-receipt", nil }); err != nil {
				return nil, err
			}
			_, err := cairnq.WaitEvent[string](ctx, tc, "approval", time.Hour)
			return nil, err
		}, nil)
		task := submit(t, c, "approve", nil, nil)
		if err := c.SendEvent(ctx(t), task.ID, "early", "secret-payload"); err != nil {
			t.Fatal(err)
		}
		if _, err := w.WorkOne(ctx(t)); err != nil {
			t.Fatal(err)
		}
		page := get(t, mount(t, c, nil), "/cairnq/tasks/"+task.ID).Body
		for _, want := range []string{"Waiting for event <strong>approval</strong>", "Durable steps", "charge", "secret-receipt",
			`<span class="muted">wait</span> approval`, "early", "secret-payload"} {
			if !strings.Contains(page, want) {
				t.Errorf("the task page lacks %q", want)
			}
		}
		hidden := get(t, mount(t, c, &console.Options{HidePayloads: true}), "/cairnq/tasks/"+task.ID).Body
		if strings.Contains(hidden, "secret-") || !strings.Contains(hidden, "charge") {
			t.Errorf("with HidePayloads the page shows an output or a payload, or hides the steps")
		}
	})
}
