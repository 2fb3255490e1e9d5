// Package otelcairnq traces and measures cairnq tasks with OpenTelemetry.
//
// It lives in a module of its own, so a program that uses cairnq without
// it never has the OpenTelemetry SDK in its module graph. A Telemetry
// plugs into the hooks the root package offers:
//
//	tel, err := otelcairnq.New(&otelcairnq.Options{TracerProvider: tp, MeterProvider: mp})
//	c, err := cairnq.Open(ctx, path, &cairnq.SQLiteOptions{Options: cairnq.Options{
//		SubmitHooks: []cairnq.SubmitHook{tel.SubmitHook()},
//	}})
//	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
//		Middleware: []cairnq.Middleware{tel.Middleware()},
//	})
//	unregister, err := tel.RegisterDepth(c) // the queue depth gauge
//
// # Spans
//
// Each submit is a producer span named "submit <queue>", and each attempt
// a consumer span named "process <queue>", both named and attributed after
// OpenTelemetry's messaging semantic conventions: messaging.system
// "cairnq", messaging.destination.name the queue, messaging.message.id the
// task id, messaging.operation.type "send" or "process",
// messaging.operation.name "submit" or "process", and
// messaging.message.conversation_id the correlation id when there is one.
// cairnq's own attributes are cairnq.task.name and, on a consumer span,
// cairnq.task.attempt, cairnq.task.outcome and messaging.client.id (the
// worker id). An attempt that did not succeed has an error status,
// error.type set to its error envelope's type (or "lease_lost") and
// cairnq.error.code to the envelope's code. A batch call is one span,
// with messaging.batch.message_count and a link to each task's submit
// span: its handler gets one context, which can have one parent. With
// DurableStepMiddleware listed in
// cairnq.WorkerOptions.DurableStepMiddleware, each durable step that runs
// (cairnq.Once) is an internal span "durable step NAME", a child of its
// attempt's, with cairnq.durable_step.name and
// cairnq.durable_step.position.
//
// # Propagation
//
// The submit hook writes the producer span's context into the task's
// metadata under the key "trace" (Options.MetadataKey), as a JSON object
// whose keys are the propagator's header names and whose values are the
// header values, strings: with the default W3C Trace Context propagator,
//
//	{"trace": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=value"}}
//
// ("tracestate" only when it is not empty). The middleware reads it back,
// so an attempt's span is a child of its submit's span, in another process
// and on another host too (with Options.Link, the first span of a trace of
// its own, linked to the submit's). Any SDK can continue the trace: a
// TypeScript or Python worker hands metadata.trace to its propagator's
// extract as the carrier (propagation.extract(context.active(),
// metadata.trace) in OpenTelemetry JS, extract(metadata["trace"]) in
// Python), and a submitter in those languages injects into an empty object
// and stores it under "trace". The reference TypeScript and Python SDKs
// put no trace context in metadata, so there was no format to match; this
// one is plain JSON for them to follow. The submit hook replaces whatever
// a caller put under the key. Options.Propagator changes the propagator:
// the default is W3C Trace Context, not the global propagator, whose
// default propagates nothing; a composite with Baggage adds a "baggage"
// member.
//
// # Outcomes
//
// cairnq.task.outcome is one of succeeded, retried, failed, lease_lost
// and suspended (a durable sleep or wait parked the task: an error that
// is cairnq.ErrSuspended is no failure).
// It is computed in the middleware, from what the handler returned, just
// before the worker settles the task, the way the worker will settle it: a
// lost lease is lease_lost (the worker records nothing; an attempt
// abandoned at WorkerOptions.MaxRun reads so too, though the worker
// records a handler_timeout failure for it, and so does a handler that
// called runtime.Goexit, whose task the worker leaves to its lease); no
// error is
// succeeded; an error is retried when its envelope (cairnq.EnvelopeOf) is
// retryable and the attempt is not the last, failed otherwise; a panic is
// retryable. It does not see a settlement the handler made itself
// (TaskContext.Succeed or Fail), a cancel request that turns a success
// into canceled, nor a settlement the database then refuses.
//
// # Metrics
//
// Counters cairnq.task.submitted, cairnq.task.settled (by outcome),
// cairnq.task.retried and cairnq.task.lease_lost; histograms
// cairnq.task.duration (the handler's time, seconds) and
// cairnq.task.queue_time (the attempt's start minus the later of the
// task's creation and its run_at, seconds); and, once RegisterDepth is
// called, the gauge cairnq.queue.depth by queue and status. Every one
// carries messaging.destination.name; the task ones carry cairnq.task.name
// too, and settled and duration cairnq.task.outcome. A Prometheus exporter
// names them:
//
//	cairnq.task.submitted   cairnq_task_submitted_total     counter             queue, name
//	cairnq.task.settled     cairnq_task_settled_total       counter             queue, name, outcome
//	cairnq.task.retried     cairnq_task_retried_total       counter             queue, name
//	cairnq.task.lease_lost  cairnq_task_lease_lost_total    counter             queue, name
//	cairnq.task.duration    cairnq_task_duration_seconds    histogram, seconds  queue, name, outcome
//	cairnq.task.queue_time  cairnq_task_queue_time_seconds  histogram, seconds  queue, name
//	cairnq.queue.depth      cairnq_queue_depth              gauge               queue, cairnq.task.status
//
// On Postgres a task's creation and run_at come from the database's clock.
// A submit through Client.SubmitTx is counted when its row is written,
// before the application's transaction commits. The depth gauge reads
// Client.Stats, which counts every row, once per collection (a Prometheus
// scrape is one): collect it every few seconds, not every few
// milliseconds. The package's example serves every metric at /metrics
// through OpenTelemetry's Prometheus exporter.
package otelcairnq
