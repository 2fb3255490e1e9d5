package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/console"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

// opener opens another Client on the same database.
type opener func(t *testing.T) *cairnq.Client

// backends runs fn on a fresh SQLite file and on a fresh Postgres database.
func backends(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "console.db")
		fn(t, func(t *testing.T) *cairnq.Client {
			c, err := cairnq.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgserver.DSN(t)
		fn(t, func(t *testing.T) *cairnq.Client {
			ex, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cairnq.OpenPostgres(context.Background(), ex, &cairnq.PostgresOptions{CloseExecutor: true})
			if err != nil {
				ex.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		})
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// mount serves the console under /cairnq/ in a mux of its own, as an
// application would, and closes it (its counting goroutine) when t ends.
func mount(t testing.TB, c *cairnq.Client, o *console.Options) http.Handler {
	h := console.Handler(c, o)
	t.Cleanup(func() { h.(io.Closer).Close() })
	mux := http.NewServeMux()
	mux.Handle("/cairnq/", http.StripPrefix("/cairnq", h))
	return mux
}

type response struct {
	Status int
	Header http.Header
	Body   string
}

func do(t *testing.T, h http.Handler, method, target string, body io.Reader, hdr map[string]string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{rec.Code, rec.Header(), rec.Body.String()}
}

func get(t *testing.T, h http.Handler, target string) response {
	t.Helper()
	return do(t, h, http.MethodGet, target, nil, nil)
}

// sameOrigin are the headers a browser sends on a same-origin form post.
var sameOrigin = map[string]string{
	"Sec-Fetch-Site": "same-origin",
	"Origin":         "http://example.com",
	"Content-Type":   "application/x-www-form-urlencoded",
}

func postForm(t *testing.T, h http.Handler, target string, form url.Values, hdr map[string]string) response {
	t.Helper()
	return do(t, h, http.MethodPost, target, strings.NewReader(form.Encode()), hdr)
}

func getJSON(t *testing.T, h http.Handler, target string, v any) {
	t.Helper()
	r := get(t, h, target)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("GET %s: Content-Type %q", target, ct)
	}
	if err := json.Unmarshal([]byte(r.Body), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", target, err, r.Body)
	}
}

func submit(t *testing.T, c *cairnq.Client, name string, payload any, o *cairnq.SubmitOptions) *cairnq.Task {
	t.Helper()
	task, err := c.Submit(ctx(t), name, payload, o)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

type apiList struct {
	Tasks []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"tasks"`
	Next *string `json:"next"`
	Prev *string `json:"prev"`
}

func (l apiList) ids() []string {
	var out []string
	for _, t := range l.Tasks {
		out = append(out, t.ID)
	}
	return out
}

// runWorker runs a worker with handlers until the test ends.
func runWorker(t *testing.T, c *cairnq.Client, handlers map[string]cairnq.Handler) {
	t.Helper()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 4, ID: "worker-test-1", Queues: []string{"default", "q2"}, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range handlers {
		w.Handle(name, h, nil)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
