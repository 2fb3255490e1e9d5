package otelcairnq

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
)

// StepMiddleware returns the middleware to list in
// cairnq.WorkerOptions.StepMiddleware: each durable step that runs
// (cairnq.Once) becomes an internal span "step NAME", a child of the
// attempt's span, with cairnq.step.name, cairnq.step.position, the
// task's id and attempt, and the step's error as its status. A step
// replayed from its record runs nothing and has no span.
func (t *Telemetry) StepMiddleware() cairnq.StepMiddleware {
	return func(ctx context.Context, step *cairnq.StepCall, next func(ctx context.Context) error) (err error) {
		ctx, span := t.tracer.Start(ctx, "step "+step.Name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				AttrStepName.String(step.Name), AttrStepPosition.Int(step.Position),
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
