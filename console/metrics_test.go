package console_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// The metrics, served by the console at /metrics and by MetricsHandler,
// count what the database holds: tasks by queue, name and status, the
// settled rate, the oldest due task's age, the queues paused; a name
// that needs escaping comes out escaped; Authorize guards them.
func TestMetrics(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		odd := "say \"hi\"\\\nbye" // a quote, a backslash and a newline
		for range 3 {
			if _, err := c.Submit(ctx(t), "email", nil, &cairnq.SubmitOptions{Queue: "mail", MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Submit(ctx(t), odd, nil, &cairnq.SubmitOptions{Queue: "images"}); err != nil {
			t.Fatal(err)
		}
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{"mail"}})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		w.Handle("email", func(context.Context, *cairnq.TaskContext) (any, error) {
			if calls++; calls == 2 {
				return nil, errors.New("smtp refused")
			}
			return "sent", nil
		}, nil)
		for range 2 {
			if _, err := w.WorkOne(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := c.PauseQueue(ctx(t), "images", &cairnq.PauseOptions{Reason: "disk full"}); err != nil {
			t.Fatal(err)
		}

		r := get(t, mount(t, c, nil), "/cairnq/metrics")
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Fatalf("GET /metrics: %d %q\n%s", r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		m := parseMetrics(t, r.Body)
		want := map[string]float64{
			`cairnq_tasks{queue="mail",name="email",status="queued"}`:                 1,
			`cairnq_tasks{queue="mail",name="email",status="running"}`:                0,
			`cairnq_tasks{queue="mail",name="email",status="succeeded"}`:              1,
			`cairnq_tasks{queue="mail",name="email",status="failed"}`:                 1,
			`cairnq_tasks{queue="mail",name="email",status="canceled"}`:               0,
			`cairnq_tasks{queue="images",name="` + odd + `",status="queued"}`:         1,
			`cairnq_settled_per_second{queue="mail",name="email",status="succeeded"}`: 1.0 / 300,
			`cairnq_settled_per_second{queue="mail",name="email",status="failed"}`:    1.0 / 300,
			`cairnq_queue_paused{queue="images"}`:                                     1,
			`cairnq_workers_leasing`:                                                  0,
			`cairnq_go_workers{state="running"}`:                                      0,
			`cairnq_go_workers{state="silent"}`:                                       0,
			`cairnq_schedules{state="running"}`:                                       0,
			`cairnq_schedules{state="silent"}`:                                        0,
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		for _, k := range []string{`cairnq_queue_oldest_due_seconds{queue="mail"}`, `cairnq_queue_oldest_due_seconds{queue="images"}`,
			`cairnq_count_age_seconds`, `cairnq_count_duration_seconds`} {
			if v, ok := m[k]; !ok || v < 0 {
				t.Errorf("%s = %v (present %v), want >= 0", k, v, ok)
			}
		}
		if _, ok := m[`cairnq_queue_paused{queue="mail"}`]; ok {
			t.Error("mail, not paused, has a cairnq_queue_paused sample")
		}

		mh := console.MetricsHandler(c, &console.Options{Authorize: func(r *http.Request) error {
			if r.Header.Get("Authorization") != "Bearer scrape" {
				return errors.New("no token")
			}
			return nil
		}})
		t.Cleanup(func() { mh.(io.Closer).Close() })
		if r := get(t, mh, "/metrics"); r.Status != http.StatusForbidden {
			t.Errorf("MetricsHandler without the token: %d, want 403", r.Status)
		}
		r = do(t, mh, http.MethodGet, "/metrics", nil, map[string]string{"Authorization": "Bearer scrape"})
		if r.Status != http.StatusOK {
			t.Fatalf("MetricsHandler: %d %s", r.Status, r.Body)
		}
		if got := parseMetrics(t, r.Body)[`cairnq_tasks{queue="mail",name="email",status="succeeded"}`]; got != 1 {
			t.Errorf("MetricsHandler's succeeded email = %v, want 1", got)
		}
	})
}

// parseMetrics reads the text format's samples into series (as written,
// label values unescaped) and values, checking that every sample's
// family was declared a gauge before it and that no series repeats.
func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			if kind != "gauge" {
				t.Fatalf("%s: type %q", name, kind)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		series, value := line[:cut], line[cut+1:]
		name, _, _ := strings.Cut(series, "{")
		if !typed[name] {
			t.Fatalf("sample before its # TYPE: %s", line)
		}
		series = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(series)
		if _, dup := out[series]; dup {
			t.Fatalf("series repeated: %s", series)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[series] = v
	}
	return out
}
