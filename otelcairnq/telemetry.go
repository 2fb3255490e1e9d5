package otelcairnq

import (
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/cairnq/cairnq-go/otelcairnq"

// MetadataKey is the default metadata key of the trace context.
const MetadataKey = "trace"

// System is the messaging.system of every span.
const System = "cairnq"

// The values of cairnq.task.outcome.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetried   = "retried"
	OutcomeFailed    = "failed"
	OutcomeLeaseLost = "lease_lost"
	// OutcomeSuspended is an attempt a durable sleep or wait parked
	// (cairnq.ErrSuspended): the task runs again later, no attempt spent.
	OutcomeSuspended = "suspended"
)

// The attributes cairnq adds to the semantic conventions' own.
const (
	AttrTaskName    = attribute.Key("cairnq.task.name")
	AttrTaskAttempt = attribute.Key("cairnq.task.attempt")
	AttrTaskOutcome = attribute.Key("cairnq.task.outcome")
	AttrTaskStatus  = attribute.Key("cairnq.task.status")
	AttrErrorCode   = attribute.Key("cairnq.error.code")
	AttrSubmitInTx  = attribute.Key("cairnq.submit.in_tx")
	// On a durable step's span (DurableStepMiddleware).
	AttrDurableStepName     = attribute.Key("cairnq.durable_step.name")
	AttrDurableStepPosition = attribute.Key("cairnq.durable_step.position")
)

// The metric names. A Prometheus exporter adds _total to the counters and
// _seconds to the histograms.
const (
	MetricSubmitted = "cairnq.task.submitted"
	MetricSettled   = "cairnq.task.settled"
	MetricRetried   = "cairnq.task.retried"
	MetricLeaseLost = "cairnq.task.lease_lost"
	MetricDuration  = "cairnq.task.duration"
	MetricQueueTime = "cairnq.task.queue_time"
	MetricDepth     = "cairnq.queue.depth"
)

// durationBuckets are the histograms' bucket bounds in seconds: the
// semantic conventions' advice for durations, extended to an hour, since a
// task may wait in its queue that long.
var durationBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
	30, 60, 300, 900, 3600,
}

// Options configure a Telemetry. The zero value (or nil) uses the global
// providers and the W3C Trace Context propagator.
type Options struct {
	// TracerProvider makes the spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes the trace context into a task's metadata at submit
	// and reads it back at work. Default propagation.TraceContext{} (W3C
	// traceparent and tracestate), not the global propagator, whose default
	// propagates nothing: every SDK reading the metadata must agree on it.
	Propagator propagation.TextMapPropagator
	// MetadataKey is the top-level metadata key holding the trace context.
	// Default "trace" (MetadataKey). The hook overwrites what a submit put
	// there.
	MetadataKey string
	// Link makes an attempt's span a link to its submit's span instead of
	// its child: the attempt starts a trace of its own (or continues the
	// span of the context the worker runs in). For tasks that run long
	// after their submit, whose trace would otherwise span hours.
	Link bool
}

// Telemetry makes the spans and records the metrics of the clients and
// workers it is plugged into. It is safe for concurrent use; one value
// serves any number of clients and workers.
type Telemetry struct {
	tracer trace.Tracer
	meter  metric.Meter
	prop   propagation.TextMapPropagator
	key    string
	link   bool

	submitted metric.Int64Counter
	settled   metric.Int64Counter
	retried   metric.Int64Counter
	leaseLost metric.Int64Counter
	duration  metric.Float64Histogram
	queueTime metric.Float64Histogram
	depth     metric.Int64ObservableGauge
}

// New returns a Telemetry over the providers of opts, its instruments
// created.
func New(opts *Options) (*Telemetry, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	if o.MetadataKey == "" {
		o.MetadataKey = MetadataKey
	}
	t := &Telemetry{
		tracer: o.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		meter:  o.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		prop:   o.Propagator,
		key:    o.MetadataKey,
		link:   o.Link,
	}
	var errs [7]error
	t.submitted, errs[0] = t.meter.Int64Counter(MetricSubmitted, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks submitted."))
	t.settled, errs[1] = t.meter.Int64Counter(MetricSettled, metric.WithUnit("{task}"),
		metric.WithDescription("Attempts ended, by the outcome the worker settles them with."))
	t.retried, errs[2] = t.meter.Int64Counter(MetricRetried, metric.WithUnit("{task}"),
		metric.WithDescription("Failed attempts whose task goes back to its queue."))
	t.leaseLost, errs[3] = t.meter.Int64Counter(MetricLeaseLost, metric.WithUnit("{task}"),
		metric.WithDescription("Attempts that lost their lease."))
	t.duration, errs[4] = t.meter.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a handler spent on an attempt."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.queueTime, errs[5] = t.meter.Float64Histogram(MetricQueueTime, metric.WithUnit("s"),
		metric.WithDescription("Time from when a task became claimable (created or run_at, the later) to its attempt's start."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.depth, errs[6] = t.meter.Int64ObservableGauge(MetricDepth, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks per queue and status."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return t, nil
}

// taskAttrs are a task's metric attributes.
func taskAttrs(queue, name string, more ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{
		semconv.MessagingDestinationName(queue), AttrTaskName.String(name),
	}, more...)...)
}
