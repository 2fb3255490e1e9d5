package cairnq_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
)

// List's Search finds tasks by their payload's or error's text, ASCII
// letters in either case, LIKE's wildcards taken as plain characters,
// together with the other filters; a bad search is refused.
func TestListSearch(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		submit := func(name string, payload any, queue string) string {
			task, err := c.Submit(ctx, name, payload, &cairnq.SubmitOptions{Queue: queue, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			return task.ID
		}
		ada := submit("email", map[string]string{"to": "Ada@Example.com"}, "mail")
		bob := submit("email", map[string]string{"to": "bob@example.com"}, "mail")
		pct := submit("report", map[string]string{"done": "50%"}, "reports")
		under := submit("report", map[string]string{"file": "a_b"}, "reports")
		adaElsewhere := submit("email", map[string]string{"to": "ada@example.com"}, "other")
		html := submit("note", map[string]string{"q": "Tom & Jerry <b>"}, "notes")
		accent := submit("note", map[string]string{"who": "Élodie"}, "notes")
		failing := submit("charge", nil, "billing")
		w := newWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"billing"}})
		w.Handle("charge", func(context.Context, *cairnq.TaskContext) (any, error) {
			return nil, errors.New("card declined by issuer")
		}, nil)
		if got := workUntil(t, c, w, failing); got.Status != cairnq.StatusFailed {
			t.Fatalf("the failing task: %s", got.Status)
		}
		ids := func(o cairnq.ListOptions) []string {
			t.Helper()
			tasks, err := c.List(ctx, &o)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, task := range tasks {
				out = append(out, task.ID)
			}
			slices.Sort(out)
			return out
		}
		sorted := func(s ...string) []string { slices.Sort(s); return s }
		for _, tc := range []struct {
			o    cairnq.ListOptions
			want []string
		}{
			{cairnq.ListOptions{Search: "ada@example"}, sorted(ada, adaElsewhere)},
			{cairnq.ListOptions{Search: "ADA@", Queue: "mail"}, sorted(ada)},
			{cairnq.ListOptions{Search: "example.com", Limit: 1, Offset: 5}, nil},
			{cairnq.ListOptions{Search: "%"}, sorted(pct)},
			{cairnq.ListOptions{Search: "a_b"}, sorted(under)},
			{cairnq.ListOptions{Search: "declined", Status: cairnq.StatusFailed}, sorted(failing)},
			{cairnq.ListOptions{Search: "nobody"}, nil},
			{cairnq.ListOptions{Search: "tom & jerry"}, sorted(html)},
			{cairnq.ListOptions{Search: "<b>"}, sorted(html)},
			{cairnq.ListOptions{Search: "Élodie"}, sorted(accent)},
		} {
			if got := ids(tc.o); !slices.Equal(got, tc.want) {
				t.Errorf("List %+v = %v, want %v", tc.o, got, tc.want)
			}
		}
		if got := ids(cairnq.ListOptions{Search: "example.com"}); len(got) != 3 || !slices.Contains(got, bob) {
			t.Errorf("List by example.com = %v, want ada's, bob's and the other ada's", got)
		}
		for _, bad := range []string{"a\x00b", "\xff"} {
			if _, err := c.List(ctx, &cairnq.ListOptions{Search: bad}); !errors.As(err, new(*cairnq.ArgumentError)) {
				t.Errorf("List with search %q: %v, want an *ArgumentError", bad, err)
			}
		}
	})
}
