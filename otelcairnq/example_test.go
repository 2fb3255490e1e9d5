package otelcairnq_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	cairnq "github.com/cairnq/cairnq-go"
	otelcairnq "github.com/cairnq/cairnq-go/otelcairnq"
)

// A process serving its cairnq metrics to Prometheus at /metrics, through
// OpenTelemetry's Prometheus exporter. Every scrape is one collection, so
// the depth gauge reads Stats once per scrape.
func ExampleTelemetry_prometheus() {
	dir, err := os.MkdirTemp("", "otelcairnq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)
	tel, err := otelcairnq.New(&otelcairnq.Options{MeterProvider: mp})
	if err != nil {
		log.Fatal(err)
	}

	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), &cairnq.SQLiteOptions{Options: cairnq.Options{
		SubmitHooks: []cairnq.SubmitHook{tel.SubmitHook()},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	unregister, err := tel.RegisterDepth(c)
	if err != nil {
		log.Fatal(err)
	}
	defer unregister()

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Middleware: []cairnq.Middleware{tel.Middleware()}})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("greet", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "hello", nil }, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()
	task, err := c.Submit(ctx, "greet", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Wait(ctx, task.ID, nil); err != nil {
		log.Fatal(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, prefix := range []string{
			"cairnq_task_submitted_total{",
			"cairnq_task_settled_total{",
			"cairnq_task_duration_seconds_count{",
			"cairnq_task_queue_time_seconds_count{",
			`cairnq_queue_depth{cairnq_task_status="succeeded"`,
		} {
			if strings.HasPrefix(line, prefix) {
				fmt.Println(line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// cairnq_queue_depth{cairnq_task_status="succeeded",messaging_destination_name="default"} 1
	// cairnq_task_duration_seconds_count{cairnq_task_name="greet",cairnq_task_outcome="succeeded",messaging_destination_name="default"} 1
	// cairnq_task_queue_time_seconds_count{cairnq_task_name="greet",messaging_destination_name="default"} 1
	// cairnq_task_settled_total{cairnq_task_name="greet",cairnq_task_outcome="succeeded",messaging_destination_name="default"} 1
	// cairnq_task_submitted_total{cairnq_task_name="greet",messaging_destination_name="default"} 1
}
