package otelcairnq

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
)

// DurableStepMiddleware returns the middleware to list in
// cairnq.WorkerOptions.DurableStepMiddleware: each durable step that
// runs (cairnq.Once) becomes an internal span "durable step NAME", a
// child of the attempt's span, with cairnq.durable_step.name,
// cairnq.durable_step.position, the task's id and attempt, and the
// step's error as its status. A step replayed from its record runs
// nothing and has no span.
func (t *Telemetry) DurableStepMiddleware() cairnq.DurableStepMiddleware {
	return func(ctx context.Context, step *cairnq.DurableStepCall, next func(ctx context.Context) error) (err error) {
		ctx, span := t.tracer.Start(ctx, "durable step "+step.Name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				AttrDurableStepName.String(step.Name), AttrDurableStepPosition.Int(step.Position),
				semconv.MessagingMessageID(step.Task.ID()), AttrTaskName.String(step.Task.Name()),
				AttrTaskAttempt.Int(step.Task.Attempt()),
			))
		defer span.End()
		returned := false
		defer func() {
			if !returned {
				span.SetStatus(codes.Error, "the step panicked or exited its goroutine")
			}
		}()
		err = next(ctx)
		returned = true
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}
