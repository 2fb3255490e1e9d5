package otelcairnq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/otelcairnq"
)

// Each durable step that runs is a span, a child of its attempt's; a
// step replayed from its record on a later attempt has none, and a
// step's error is its span's status.
func TestSpanPerDurableStep(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		p := newProcess(t, otelcairnq.Options{})
		c := p.client(t, open)
		task, err := c.Submit(t.Context(), "durable", nil, &cairnq.SubmitOptions{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		p.runWorker(t, c, cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff, Logger: quiet,
			DurableStepMiddleware: []cairnq.DurableStepMiddleware{p.tel.DurableStepMiddleware()}}, func(w *cairnq.Worker) error {
			return w.Handle("durable", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				if _, err := cairnq.Once(ctx, tc, "charge", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return nil, err
				}
				return cairnq.Once(ctx, tc, "ship", func(context.Context) (int, error) {
					if tc.Attempt() == 1 {
						return 0, errors.New("carrier down")
					}
					return 2, nil
				})
			}, nil)
		})
		if done := wait(t, c, task.ID); done.Status != cairnq.StatusSucceeded {
			t.Fatalf("task %s", done.Status)
		}
		attempts := map[trace.SpanID]int64{}
		for _, s := range p.waitSpans(t, trace.SpanKindConsumer, 2) {
			attempts[s.SpanContext().SpanID()] = attrs(s.Attributes())[otelcairnq.AttrTaskAttempt].AsInt64()
		}
		type run struct {
			name    string
			attempt int64
			failed  bool
		}
		var got []run
		for _, s := range p.waitSpans(t, trace.SpanKindInternal, 3) {
			a := attrs(s.Attributes())
			if a[semconv.MessagingMessageIDKey].AsString() != task.ID || s.Name() != "durable step "+a[otelcairnq.AttrDurableStepName].AsString() {
				t.Errorf("step span %q: %v", s.Name(), a)
			}
			att, ok := attempts[s.Parent().SpanID()]
			if !ok || att != a[otelcairnq.AttrTaskAttempt].AsInt64() {
				t.Errorf("step span %q's parent is not its attempt's span", s.Name())
			}
			got = append(got, run{a[otelcairnq.AttrDurableStepName].AsString(), att, s.Status().Code == codes.Error})
		}
		want := map[run]bool{{"charge", 1, false}: true, {"ship", 1, true}: true, {"ship", 2, false}: true}
		for _, r := range got {
			if !want[r] {
				t.Errorf("step spans %v, want charge on attempt 1, ship failing on 1 and succeeding on 2", got)
				break
			}
		}
	})
}

// An attempt a durable sleep parks is suspended, not failed.
func TestSuspendedAttemptIsNoFailure(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		p := newProcess(t, otelcairnq.Options{})
		c := p.client(t, open)
		task, err := c.Submit(t.Context(), "nap", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p.runWorker(t, c, cairnq.WorkerOptions{Logger: quiet}, func(w *cairnq.Worker) error {
			return w.Handle("nap", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				return nil, cairnq.Sleep(ctx, tc, "nap", time.Hour)
			}, nil)
		})
		s := p.waitSpans(t, trace.SpanKindConsumer, 1)[0]
		if a := attrs(s.Attributes()); a[otelcairnq.AttrTaskOutcome].AsString() != otelcairnq.OutcomeSuspended || s.Status().Code == codes.Error {
			t.Fatalf("a parked attempt's span: outcome %v, status %v; want suspended, no error", a[otelcairnq.AttrTaskOutcome], s.Status())
		}
		if got, _ := c.Get(t.Context(), task.ID); got.Status != cairnq.StatusQueued {
			t.Fatalf("task %s, want queued (parked)", got.Status)
		}
	})
}
