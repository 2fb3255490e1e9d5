package otelcairnq_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	otelcairnq "github.com/cairnq/cairnq-go/otelcairnq"
)

// The Postgres server pgserver.DSN starts is stopped here.
func TestMain(m *testing.M) { pgserver.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// opener opens one more client on a test's database, closed at cleanup:
// two clients are two processes as far as the database is concerned.
type opener func(t *testing.T, o cairnq.Options) *cairnq.Client

// backends are the databases every test runs on: a SQLite file and a
// fresh database on a real PostgreSQL server.
var backends = []struct {
	name string
	db   func(t *testing.T) opener
}{
	{"sqlite", func(t *testing.T) opener {
		path := filepath.Join(t.TempDir(), "tasks.db")
		return func(t *testing.T, o cairnq.Options) *cairnq.Client {
			t.Helper()
			c, err := cairnq.Open(t.Context(), path, &cairnq.SQLiteOptions{Options: o})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}},
	{"postgres", func(t *testing.T) opener {
		dsn := pgserver.DSN(t)
		return func(t *testing.T, o cairnq.Options) *cairnq.Client {
			t.Helper()
			ex, err := cairnqpgx.Open(t.Context(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := cairnq.OpenPostgres(t.Context(), ex, &cairnq.PostgresOptions{Options: o, CloseExecutor: true})
			if err != nil {
				ex.Close()
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}},
}

// eachBackend runs fn as a parallel subtest per backend.
func eachBackend(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.db(t))
		})
	}
}

// process is one process's telemetry: its own tracer and meter providers,
// recording in memory.
type process struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *otelcairnq.Telemetry
}

func newProcess(t *testing.T, opts otelcairnq.Options) *process {
	t.Helper()
	p := &process{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	t.Cleanup(func() {
		p.tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	opts.TracerProvider, opts.MeterProvider = p.tp, mp
	tel, err := otelcairnq.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	p.tel = tel
	return p
}

// client opens a client of this process with its submit hook.
func (p *process) client(t *testing.T, open opener) *cairnq.Client {
	return open(t, cairnq.Options{SubmitHooks: []cairnq.SubmitHook{p.tel.SubmitHook()}, Logger: quiet})
}

// ended returns the ended spans of kind.
func (p *process) ended(kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range p.spans.Ended() {
		if s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans polls until n spans of kind have ended and returns them.
func (p *process) waitSpans(t *testing.T, kind trace.SpanKind, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	eventually(t, func() bool {
		got = p.ended(kind)
		return len(got) >= n
	}, "%d %v spans", n, kind)
	if len(got) != n {
		t.Fatalf("%d %v spans, want %d", len(got), kind, n)
	}
	return got
}

// collect reads the process's metrics.
func (p *process) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// eventually polls cond until it holds, failing t after 30s.
func eventually(t *testing.T, cond func() bool, what string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for "+what, args...)
		}
		<-tick.C
	}
}

// runWorker runs a worker of c with the process's middleware until the
// test ends; register adds its handlers.
func (p *process) runWorker(t *testing.T, c *cairnq.Client, o cairnq.WorkerOptions, register func(w *cairnq.Worker) error) *cairnq.Worker {
	t.Helper()
	o.Middleware = append([]cairnq.Middleware{p.tel.Middleware()}, o.Middleware...)
	if o.PollInterval == 0 {
		o.PollInterval = cairnq.MinPollInterval
	}
	w, err := cairnq.NewWorker(c, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := register(w); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("worker: %v", err)
		}
	})
	return w
}

// wait waits for task id to reach a terminal status.
func wait(t *testing.T, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	task, err := c.Wait(t.Context(), id, &cairnq.WaitOptions{Timeout: time.Minute, PollInterval: cairnq.MinPollInterval})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// attrs is a span's attributes by key.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs fails t for each of want that kvs lacks or holds another value of.
func wantAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(kvs)
	for _, w := range want {
		if v, ok := got[w.Key]; !ok || v != w.Value {
			t.Errorf("%s: %s = %q (present %v), want %q", what, w.Key, v.Emit(), ok, w.Value.Emit())
		}
	}
}

// sum is the value of counter name's point with exactly the attributes
// attrs (0 when absent), and whether the instrument was there at all.
func sum(rm metricdata.ResourceMetrics, name string, kv ...attribute.KeyValue) int64 {
	want := attribute.NewSet(kv...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					if dp.Attributes.Equals(&want) {
						return dp.Value
					}
				}
			}
		}
	}
	return 0
}

// histCount is the count of histogram name's point with exactly attrs.
func histCount(rm metricdata.ResourceMetrics, name string, kv ...attribute.KeyValue) (count uint64, total float64) {
	want := attribute.NewSet(kv...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
				for _, dp := range h.DataPoints {
					if dp.Attributes.Equals(&want) {
						return dp.Count, dp.Sum
					}
				}
			}
		}
	}
	return 0, 0
}

// gauge is gauge name's points, by their attribute sets' encodings.
func gauge(rm metricdata.ResourceMetrics, name string) map[attribute.Distinct]int64 {
	out := map[attribute.Distinct]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok {
				for _, dp := range g.DataPoints {
					out[dp.Attributes.Equivalent()] = dp.Value
				}
			}
		}
	}
	return out
}
