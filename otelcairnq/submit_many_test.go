package otelcairnq_test

import (
	"encoding/json"
	"fmt"
	"testing"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/otelcairnq"
)

// A batch is one producer span per task: the hook runs per item, so each
// task carries its own span's context, and a worker's span for it is the
// child of that one, as for a lone Submit.
func TestSubmitManySpanPerTask(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		api := newProcess(t, otelcairnq.Options{})
		c := api.client(t, open)
		ctx, request := api.tp.Tracer("test").Start(t.Context(), "POST /import")
		tasks, err := c.SubmitMany(ctx, []cairnq.SubmitItem{
			{Name: "import", Options: cairnq.SubmitOptions{Queue: "imports"}},
			{Name: "import", Options: cairnq.SubmitOptions{Queue: "imports", Key: "row-2"}},
			{Name: "report", Options: cairnq.SubmitOptions{Queue: "reports"}},
		})
		request.End()
		if err != nil {
			t.Fatal(err)
		}
		spans := api.waitSpans(t, trace.SpanKindProducer, 3)
		byTask := map[string]trace.SpanContext{}
		for _, s := range spans {
			if s.Parent().SpanID() != request.SpanContext().SpanID() {
				t.Errorf("span %q's parent %v, want the request span", s.Name(), s.Parent())
			}
			for _, a := range s.Attributes() {
				if a.Key == semconv.MessagingMessageIDKey {
					byTask[a.Value.AsString()] = s.SpanContext()
				}
			}
		}
		for i, task := range tasks {
			sc, ok := byTask[task.ID]
			if !ok {
				t.Fatalf("no producer span names task %d (%s): %v", i, task.ID, byTask)
			}
			stored, err := c.Get(t.Context(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			var md struct {
				Trace map[string]string `json:"trace"`
			}
			_ = json.Unmarshal(stored.Metadata, &md)
			if want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()); md.Trace["traceparent"] != want {
				t.Errorf("task %d's metadata %s, want its own span's traceparent %s", i, stored.Metadata, want)
			}
		}
	})
}
