package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/console"
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

// BenchmarkPages measures the server time of each page. Seeding a million
// tasks takes minutes, so CAIRNQ_CONSOLE_BENCH_SQLITE (a file) and
// CAIRNQ_CONSOLE_BENCH_PG (a DSN) keep a seeded database between runs: it
// is seeded only while it holds no task.
// seeded seeds c unless it already holds tasks, and returns a canceled
// task's id.
func seeded(b *testing.B, c *cairnq.Client, n int) string {
	b.Helper()
	ctx := context.Background()
	if some, err := c.List(ctx, &cairnq.ListOptions{Limit: 1}); err != nil {
		b.Fatal(err)
	} else if len(some) == 0 {
		return seed(b, c, n)
	}
	canceled, err := c.List(ctx, &cairnq.ListOptions{Status: cairnq.StatusCanceled, Limit: 1})
	if err != nil || len(canceled) == 0 {
		b.Fatalf("a reused database with no canceled task (%v)", err)
	}
	return canceled[0].ID
}

func BenchmarkPages(b *testing.B) {
	n := benchTasks()
	open := map[string]func(b *testing.B) *cairnq.Client{
		"sqlite": func(b *testing.B) *cairnq.Client {
			path := os.Getenv("CAIRNQ_CONSOLE_BENCH_SQLITE")
			if path == "" {
				path = filepath.Join(b.TempDir(), "bench.db")
			}
			c, err := cairnq.Open(context.Background(), path, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return c
		},
		"postgres": func(b *testing.B) *cairnq.Client {
			dsn := os.Getenv("CAIRNQ_CONSOLE_BENCH_PG")
			if dsn == "" {
				dsn = pgserver.DSN(b)
			}
			ex, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{MaxConns: 8})
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
			id := seeded(b, c, n)
			ch := console.Handler(c, nil)
			b.Cleanup(func() { ch.(io.Closer).Close() })
			mux := http.NewServeMux()
			mux.Handle("/cairnq/", http.StripPrefix("/cairnq", ch))
			h := http.Handler(mux)
			pages := map[string]string{
				"overview":          "/cairnq/",
				"list":              "/cairnq/tasks",
				"list-name":         "/cairnq/tasks?name=job-1",
				"list-status":       "/cairnq/tasks?status=canceled",
				"list-queue-status": "/cairnq/tasks?queue=other&status=canceled",
				"list-parent-none":  "/cairnq/tasks?parent_id=task_NOSUCH",
				"list-page-deep":    "/cairnq/tasks?before=" + id,
				"task":              "/cairnq/tasks/" + id,
				"api-tasks":         "/cairnq/api/tasks",
			}
			// overview-count is the background count itself, which the
			// overview never waits on once one has ended; overview is
			// timed after the first.
			b.Run("overview-count", func(b *testing.B) {
				for b.Loop() {
					if err := console.CountOnce(ch); err != nil {
						b.Fatal(err)
					}
				}
			})
			for !strings.Contains(benchBody(h, "/cairnq/"), "Counted ") {
				time.Sleep(10 * time.Millisecond) // the first count, off the clock
			}
			for _, name := range []string{"overview", "list", "list-name", "list-status", "list-queue-status", "list-parent-none", "list-page-deep", "task", "api-tasks"} {
				b.Run(name, func(b *testing.B) {
					var took []time.Duration // per request, for the p95 the targets name
					for b.Loop() {
						start := time.Now()
						r := benchGet(h, pages[name])
						took = append(took, time.Since(start))
						if r != 200 {
							b.Fatalf("%s: %d", pages[name], r)
						}
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[(len(took)*95+99)/100-1].Microseconds())/1000, "p95-ms")
				})
			}
		})
	}
}

func benchBody(h http.Handler, target string) string {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Body.String()
}

func benchGet(h http.Handler, target string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code
}
