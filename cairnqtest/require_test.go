package cairnqtest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtest"
)

type email struct {
	To      string    `json:"to"`
	Subject string    `json:"subject"`
	At      time.Time `json:"at,omitzero"`
}

var sendEmail = cairnq.Define[email, string]("send_email")

func TestRequireSubmitted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		mustSubmit := func(name string, payload any, o *cairnq.SubmitOptions) *cairnq.Task {
			t.Helper()
			task, err := c.Submit(ctx, name, payload, o)
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		a := mustSubmit("report", map[string]any{"id": 1, "tags": []string{"x", "y"}},
			&cairnq.SubmitOptions{Queue: "reports", Key: "report:1", Priority: 5})
		b := mustSubmit("report", map[string]any{"id": 2}, &cairnq.SubmitOptions{Queue: "reports"})
		mustSubmit("other", map[string]any{"id": 1}, nil)

		// Matches: by each field, and the payload as JSON whatever its
		// spelling.
		for _, tc := range []struct {
			m    *cairnq.Task
			want *cairnqtest.Match
		}{
			{a, &cairnqtest.Match{Key: "report:1"}},
			{a, &cairnqtest.Match{Priority: new(5)}},
			{b, &cairnqtest.Match{Priority: new(0)}},
			{a, &cairnqtest.Match{Queue: "reports", Payload: json.RawMessage(`{ "tags": ["x","y"], "id": 1.0 }`)}},
			{b, &cairnqtest.Match{Payload: map[string]int{"id": 2}}},
			{b, &cairnqtest.Match{Payload: []byte(`{"id":2e0}`), Status: cairnq.StatusQueued}},
		} {
			r := record(t, func(tb cairnqtest.TB) {
				got := cairnqtest.RequireSubmitted(ctx, tb, c, "report", tc.want)
				if got.ID != tc.m.ID {
					t.Errorf("RequireSubmitted(%+v) = %s, want %s", tc.want, got.ID, tc.m.ID)
				}
			})
			r.mustPass(t)
		}
		if got := cairnqtest.RequireSubmitted(ctx, t, c, "other", nil); got.Name != "other" {
			t.Errorf("got %s", got.Name)
		}

		// Failures name what was wanted and why each candidate missed.
		r := record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "report", &cairnqtest.Match{
				Queue: "default", Priority: new(7), Payload: map[string]int{"id": 3},
			})
			t.Error("RequireSubmitted returned after failing")
		})
		msg := r.mustFail(t,
			`RequireSubmitted: no task named "report" matches {queue="default" priority=7 payload={"id":3}}`,
			`the 2 task(s) named "report":`,
			a.ID+`: queue "reports", want "default"; priority 5, want 7; payload {"id":1,"tags":["x","y"]}, want {"id":3}`,
			b.ID+`: queue "reports", want "default"; priority 0, want 7; payload {"id":2}, want {"id":3}`,
		)
		if strings.Index(msg, a.ID) > strings.Index(msg, b.ID) {
			t.Errorf("candidates not listed oldest first:\n%s", msg)
		}
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "nope", nil)
		}).mustFail(t, `no task named "nope" matches (any); there is no task named "nope"`)
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Key: "report:9"})
		}).mustFail(t, `key "report:9" points at no task`)
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Key: "report:1", Status: cairnq.StatusSucceeded})
		}).mustFail(t, a.ID+": status queued, want succeeded", b.ID+`: key "report:1" points at `+a.ID)
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Queue: "reports"})
		}).mustFail(t, `2 tasks named "report" match {queue="reports"}, want exactly one:`, a.ID, b.ID)
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Payload: json.RawMessage(`{`)})
		}).mustFail(t, "Match.Payload cannot be encoded as JSON")

		// RequireNotSubmitted is the converse.
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireNotSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Queue: "default"})
			cairnqtest.RequireNotSubmitted(ctx, tb, c, "nope", nil)
			cairnqtest.RequireNotSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Payload: map[string]int{"id": 3}})
		}).mustPass(t)
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireNotSubmitted(ctx, tb, c, "report", &cairnqtest.Match{Payload: map[string]any{"id": 2}})
			t.Error("RequireNotSubmitted returned after failing")
		}).mustFail(t, `RequireNotSubmitted: 1 task(s) named "report" match {payload={"id":2}}, want none:`,
			b.ID+`: queue "reports", priority 0, status queued, payload {"id":2}`)
	})
}

func TestRequireSubmittedDef(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
		sent, err := sendEmail.Submit(ctx, c, email{To: "ada@example.com", Subject: "hi", At: at}, &cairnq.SubmitOptions{Queue: "mail"})
		if err != nil {
			t.Fatal(err)
		}
		// A payload with a field P does not have still decodes to the same P.
		if _, err := c.Submit(ctx, sendEmail.Name, json.RawMessage(`{"to":"bob@example.com","subject":"yo","x":1}`), nil); err != nil {
			t.Fatal(err)
		}

		// The decoded time has a *Location of its own, which DeepEqual
		// tells apart: the P still matches, by its JSON.
		task, p := cairnqtest.RequireSubmittedDef(ctx, t, c, sendEmail, &cairnqtest.Match{
			Payload: email{To: "ada@example.com", Subject: "hi", At: at},
		})
		if task.ID != sent.ID || p.To != "ada@example.com" || !p.At.Equal(at) {
			t.Errorf("got %s %+v", task.ID, p)
		}
		cairnqtest.RequireSubmittedDef(ctx, t, c, sendEmail, &cairnqtest.Match{Payload: email{To: "bob@example.com", Subject: "yo"}})
		cairnqtest.RequireNotSubmittedDef(ctx, t, c, sendEmail, &cairnqtest.Match{Payload: email{To: "bob@example.com"}})

		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmittedDef(ctx, tb, c, sendEmail, &cairnqtest.Match{Queue: "mail", Payload: email{To: "eve@example.com"}})
		}).mustFail(t, `RequireSubmittedDef: no task named "send_email" matches`,
			sent.ID+`: payload {To:ada@example.com Subject:hi`, `want {To:eve@example.com Subject:`, "(as cairnqtest_test.email)")
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmittedDef(ctx, tb, c, sendEmail, &cairnqtest.Match{Payload: map[string]string{"to": "ada@example.com"}})
		}).mustFail(t, "Match.Payload is a map[string]string, want a cairnqtest_test.email")
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireNotSubmittedDef(ctx, tb, c, sendEmail, &cairnqtest.Match{Queue: "mail"})
		}).mustFail(t, `RequireNotSubmittedDef: 1 task(s) named "send_email" match {queue="mail"}, want none`, sent.ID)

		// A stored payload that is not a P never matches a typed payload.
		if _, err := c.Submit(ctx, sendEmail.Name, []int{1}, &cairnq.SubmitOptions{Queue: "odd"}); err != nil {
			t.Fatal(err)
		}
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.RequireSubmittedDef(ctx, tb, c, sendEmail, &cairnqtest.Match{Queue: "odd", Payload: email{}})
		}).mustFail(t, "payload [1] is not a cairnqtest_test.email")
	})
}
