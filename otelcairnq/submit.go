package otelcairnq

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
)

// SubmitHook returns the hook to list in cairnq.Options.SubmitHooks. Each
// submit becomes a producer span, a child of the span in the submit's
// context, whose context the hook writes into the task's metadata under
// the metadata key; cairnq.task.submitted counts the submits that
// returned a task. A keyed submit that reuses a task returns the existing
// task, whose metadata (and so whose trace) is the first submit's. A
// SubmitTx is counted when its row is written, before the caller's
// transaction commits (the span has cairnq.submit.in_tx = true). A
// SubmitMany batch is one span per task, each the parent of its task's
// attempts as a lone submit's is (rather than one span linking them all,
// which would give every task's trace the same parent and lose which
// task a refusal was); each ends once the batch is written. List it last
// to see what the other hooks changed (the queue, the options).
func (t *Telemetry) SubmitHook() cairnq.SubmitHook {
	return func(ctx context.Context, s *cairnq.Submission, next func(ctx context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		queue := s.Options.Queue
		if queue == "" {
			queue = cairnq.DefaultQueue
		}
		attrs := []attribute.KeyValue{
			semconv.MessagingSystemKey.String(System),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("submit"),
			semconv.MessagingDestinationName(queue),
			AttrTaskName.String(s.Name),
		}
		if s.Options.CorrelationID != "" {
			attrs = append(attrs, semconv.MessagingMessageConversationID(s.Options.CorrelationID))
		}
		if s.InTx {
			attrs = append(attrs, AttrSubmitInTx.Bool(true))
		}
		ctx, span := t.tracer.Start(ctx, "submit "+queue,
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
		defer span.End()

		carrier := propagation.MapCarrier{}
		t.prop.Inject(ctx, carrier)
		if len(carrier) > 0 {
			// Metadata that is not a JSON object is refused by the insert
			// with its own error; the hook adds none of its own.
			_ = s.SetMetadata(t.key, map[string]string(carrier))
		}

		task, err := next(ctx)
		if err != nil {
			env := cairnq.EnvelopeOf(err)
			span.SetAttributes(semconv.ErrorTypeKey.String(env.Type))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			return task, err
		}
		if task != nil {
			span.SetAttributes(semconv.MessagingMessageID(task.ID))
		}
		t.submitted.Add(ctx, 1, taskAttrs(queue, s.Name))
		return task, nil
	}
}

// carrierOf reads the trace context a submit wrote into metadata: the
// string members of the object under key. Anything else reads as none.
func carrierOf(metadata json.RawMessage, key string) propagation.MapCarrier {
	if len(metadata) == 0 {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(metadata, &top) != nil {
		return nil
	}
	raw, ok := top[key]
	if !ok {
		return nil
	}
	var fields map[string]any
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	for k, v := range fields {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	return carrier
}
