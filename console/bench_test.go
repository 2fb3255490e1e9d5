package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/conformance"
)

// benchTasks is how many tasks the page benchmarks seed:
// CAIRNQ_CONSOLE_BENCH_N, default 100000.
func benchTasks() int {
	if n, err := strconv.Atoi(os.Getenv("CAIRNQ_CONSOLE_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// seed submits n tasks over four names and two queues, from 16 goroutines
// so the stores group their commits; a tenth are then canceled.
func seed(b *testing.B, c *cairnq.Client, n int) (some string) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make(chan string, 64)
	errs := make(chan error, 1)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				t, err := c.Submit(ctx, "job-"+strconv.Itoa(i%4), map[string]any{"i": i, "text": "some payload text"},
					&cairnq.SubmitOptions{Queue: []string{"default", "other"}[i%2], CorrelationID: "c" + strconv.Itoa(i%100)})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if i%10 == 0 {
					ids <- t.ID
				}
			}
		}()
	}
	go func() { wg.Wait(); close(ids) }()
	for id := range ids {
		c.Cancel(ctx, id)
		some = id
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return some
}

func BenchmarkPages(b *testing.B) {
	n := benchTasks()
	open := map[string]func(b *testing.B) *cairnq.Client{
		"sqlite": func(b *testing.B) *cairnq.Client {
			c, err := cairnq.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c
		},
		"postgres": func(b *testing.B) *cairnq.Client {
			ex, err := cairnqpgx.Open(context.Background(), conformance.PostgresDSN(b), &cairnqpgx.Options{MaxConns: 8})
			if err != nil {
				b.Fatal(err)
			}
			c, err := cairnq.OpenPostgres(context.Background(), ex, &cairnq.PostgresOptions{CloseExecutor: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c
		},
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			c := open[backend](b)
			id := seed(b, c, n)
			h := mount(c, nil)
			pages := map[string]string{
				"overview":       "/cairnq/",
				"list":           "/cairnq/tasks",
				"list-name":      "/cairnq/tasks?name=job-1",
				"list-status":    "/cairnq/tasks?status=canceled",
				"list-page-deep": "/cairnq/tasks?before=" + id,
				"task":           "/cairnq/tasks/" + id,
				"api-tasks":      "/cairnq/api/tasks",
			}
			for _, name := range []string{"overview", "list", "list-name", "list-status", "list-page-deep", "task", "api-tasks"} {
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						r := benchGet(h, pages[name])
						if r != 200 {
							b.Fatalf("%s: %d", pages[name], r)
						}
					}
				})
			}
		})
	}
}

func benchGet(h http.Handler, target string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code
}
