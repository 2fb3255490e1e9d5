package otelcairnq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
)

// The envelope the worker records for a handler that panicked.
const (
	panicType = "Panic"
	panicCode = "handler_panic"
)

// Middleware returns the middleware to list in
// cairnq.WorkerOptions.Middleware, first so that it times and sees
// everything the others do. Each attempt becomes a consumer span whose
// context the handler receives: a child of its submit's span (read from
// the task's metadata), or linked to it with Options.Link. A batch call is
// one span for the whole call, linked to each task's submit span, with
// messaging.batch.message_count: its handler receives one context, which
// can have one parent only, and the semantic conventions ask for links
// there. It records every metric of an attempt: queue time when the call
// starts, then duration and the counters by outcome (see the package
// documentation). A panic ends the span as failed and goes on to the
// worker, which recovers it.
func (t *Telemetry) Middleware() cairnq.Middleware {
	return func(ctx context.Context, call *cairnq.Call, next func(ctx context.Context) (any, error)) (result any, err error) {
		if len(call.Tasks) == 0 { // not a call a worker makes
			return next(ctx)
		}
		start := time.Now()
		for _, tc := range call.Tasks {
			t.queueTime.Record(ctx, queueTime(tc.Task(), start).Seconds(), taskAttrs(tc.Queue(), tc.Name()))
		}
		ctx, span := t.startProcess(ctx, call)
		returned := false
		defer func() {
			var p any
			if !returned {
				// nil: runtime.Goexit, which goes on, and which the worker
				// reports, leaving the task to its lease.
				p = recover()
			}
			exited := !returned && p == nil
			t.endProcess(ctx, span, call, time.Since(start), err, p != nil, p, exited)
			if p != nil {
				panic(p)
			}
		}()
		result, err = next(ctx)
		returned = true
		return result, err
	}
}

// queueTime is how long task waited between becoming claimable and start,
// never negative (on Postgres the task's times come from the database's
// clock, start from this host's).
func queueTime(task *cairnq.Task, start time.Time) time.Duration {
	ready := task.CreatedAt
	if task.RunAt.After(ready) {
		ready = task.RunAt
	}
	if ready.IsZero() || start.Before(ready) {
		return 0
	}
	return start.Sub(ready)
}

// startProcess starts the call's consumer span.
func (t *Telemetry) startProcess(ctx context.Context, call *cairnq.Call) (context.Context, trace.Span) {
	first := call.Tasks[0]
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(first.Queue()),
		semconv.MessagingClientID(first.WorkerID()),
		AttrTaskName.String(first.Name()),
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if call.Batch {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(call.Tasks)))
		for _, tc := range call.Tasks {
			if sc := t.remote(tc); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
					semconv.MessagingMessageID(tc.ID()), AttrTaskAttempt.Int(tc.Attempt()),
				}}))
			}
		}
	} else {
		attrs = append(attrs, semconv.MessagingMessageID(first.ID()), AttrTaskAttempt.Int(first.Attempt()))
		if id := first.CorrelationID(); id != "" {
			attrs = append(attrs, semconv.MessagingMessageConversationID(id))
		}
		if carrier := carrierOf(first.Metadata(), t.key); carrier != nil {
			extracted := t.prop.Extract(context.Background(), carrier)
			if sc := trace.SpanContextFromContext(extracted); sc.IsValid() {
				if t.link {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
				} else {
					ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
				}
			}
			if bag := baggage.FromContext(extracted); bag.Len() > 0 {
				ctx = baggage.ContextWithBaggage(ctx, bag)
			}
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	return t.tracer.Start(ctx, "process "+first.Queue(), opts...)
}

// remote is the submit's span context in tc's metadata, if any.
func (t *Telemetry) remote(tc *cairnq.TaskContext) trace.SpanContext {
	carrier := carrierOf(tc.Metadata(), t.key)
	if carrier == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), carrier))
}

// endProcess records how the call ended, on its span and its metrics.
func (t *Telemetry) endProcess(ctx context.Context, span trace.Span, call *cairnq.Call, took time.Duration, err error, panicked bool, p any, exited bool) {
	defer span.End()
	var env cairnq.ErrorEnvelope
	switch {
	case panicked:
		env = cairnq.ErrorEnvelope{Type: panicType, Code: panicCode, Message: fmt.Sprint(p), Retryable: true}
	case err != nil:
		env = cairnq.EnvelopeOf(err)
	}
	suspended := !panicked && isSuspended(err)
	failed := (panicked || err != nil) && !suspended
	// Uniform holds the outcome every task of the call shares; a batch of
	// tasks on different attempts may not share one.
	uniform := ""
	for i, tc := range call.Tasks {
		outcome := outcomeOf(tc, err, failed, env.Retryable, exited)
		if i == 0 {
			uniform = outcome
		} else if outcome != uniform {
			uniform = ""
		}
		attrs := taskAttrs(tc.Queue(), tc.Name(), AttrTaskOutcome.String(outcome))
		t.duration.Record(ctx, took.Seconds(), attrs)
		t.settled.Add(ctx, 1, attrs)
		switch outcome {
		case OutcomeRetried:
			t.retried.Add(ctx, 1, taskAttrs(tc.Queue(), tc.Name()))
		case OutcomeLeaseLost:
			t.leaseLost.Add(ctx, 1, taskAttrs(tc.Queue(), tc.Name()))
		}
	}
	if uniform != "" {
		span.SetAttributes(AttrTaskOutcome.String(uniform))
	}
	switch {
	case uniform == OutcomeLeaseLost:
		// Whatever the handler returned, the worker records nothing.
		span.SetAttributes(semconv.ErrorTypeKey.String(OutcomeLeaseLost))
		if err != nil {
			span.RecordError(err)
		}
		status := "lease lost"
		if exited {
			status = "handler called runtime.Goexit; the task is left to its lease"
		}
		span.SetStatus(codes.Error, status)
	case failed:
		span.SetAttributes(semconv.ErrorTypeKey.String(env.Type), AttrErrorCode.String(env.Code))
		if panicked {
			span.AddEvent("exception", trace.WithAttributes(
				semconv.ExceptionTypeKey.String(panicType), semconv.ExceptionMessage(env.Message)))
		} else {
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, env.Message)
	}
}

// outcomeOf predicts how the worker settles tc after its call ended with
// err (failed: with an error or a panic whose envelope is retryable or
// not; exited: by runtime.Goexit, settling nothing).
func outcomeOf(tc *cairnq.TaskContext, err error, failed, retryable, exited bool) string {
	switch {
	case exited, tc.LostLease(), isLostLease(err):
		return OutcomeLeaseLost
	case !failed && err != nil: // parked by a durable sleep or wait
		return OutcomeSuspended
	case !failed:
		return OutcomeSucceeded
	case retryable && tc.Attempt() < tc.Task().MaxAttempts:
		return OutcomeRetried
	default:
		return OutcomeFailed
	}
}

// isLostLease reports whether err says the lease was lost.
func isLostLease(err error) bool { return isErr(err, cairnq.ErrLostLease) }

// isSuspended reports whether err says a durable sleep or wait parked
// the task.
func isSuspended(err error) bool { return isErr(err, cairnq.ErrSuspended) }

// isErr is errors.Is(err, target), surviving an error whose own Is
// method panics (the worker survives it too).
func isErr(err, target error) (is bool) {
	if err == nil {
		return false
	}
	defer func() {
		if recover() != nil {
			is = false
		}
	}()
	return errors.Is(err, target)
}
