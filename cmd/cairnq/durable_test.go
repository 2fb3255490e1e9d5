package main

import (
	"context"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
)

// libClient opens b's database as an application would, for a worker.
func libClient(t *testing.T, b backend) *cairnq.Client {
	t.Helper()
	ok(t, "migrate", "--db", b.db)
	d, err := connect(t.Context(), target{postgres: b.dialect == protocol.Postgres, dsn: b.db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	c, err := d.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get lists a durable handler's steps and what it waits for, and event
// send delivers the event, by id and by key, refusing a second one.
func TestEventSendAndDurableGet(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		c := libClient(t, b)
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if _, err := cairnq.Once(ctx, tc, "charge", func(context.Context) (string, error) { return "ch_1", nil }); err != nil {
				return nil, err
			}
			ev, err := cairnq.WaitEvent[map[string]string](ctx, tc, "approval", time.Hour)
			return ev.Payload["by"], err
		}, nil)
		task, err := c.Submit(ctx, "approve", nil, &cairnq.SubmitOptions{Key: "order-7"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WorkOne(ctx); err != nil {
			t.Fatal(err)
		}
		r := ok(t, "get", "--db", b.db, task.ID)
		for _, want := range []string{`waiting for event "approval" until `, "durable steps:", "charge", `"ch_1"`, "approval  wait"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("get of a waiting task lacks %q:\n%s", want, r.stdout)
			}
		}
		want(t, cli(t, "event", "--db", b.db, "send", task.ID, "approval", "{not json"), exitUsage)
		want(t, cli(t, "event", "--db", b.db, "send", cairnq.NewTaskID(), "approval"), exitNotFound)
		if r := ok(t, "event", "--db", b.db, "--key", "send", "order-7", "approval", `{"by":"ann"}`); !strings.Contains(r.stdout, "sent approval to order-7") {
			t.Errorf("event send --key: %s", r)
		}
		r = cli(t, "event", "--db", b.db, "send", task.ID, "approval", `{"by":"bob"}`)
		if want(t, r, 1, "event send (again)"); !strings.Contains(r.stderr, "delivered already") {
			t.Errorf("a second event: %s", r)
		}
		if _, err := w.WorkOne(ctx); err != nil {
			t.Fatal(err)
		}
		r = ok(t, "get", "--db", b.db, task.ID)
		for _, want := range []string{"succeeded, attempt", "events:", `"ann"`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("get of the task after its event lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "waiting for") {
			t.Errorf("get of an ended task says it waits:\n%s", r.stdout)
		}
	})
}
