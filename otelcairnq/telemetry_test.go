package otelcairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	cairnq "github.com/cairnq/cairnq-go"
	otelcairnq "github.com/cairnq/cairnq-go/otelcairnq"
)

// A task submitted by one client (the API process) and run by a worker
// of another (the worker process, with providers of its own) is one
// trace: the attempt's span is the child of the submit's, whose context
// travelled in the task's metadata.
func TestTraceCrossesClients(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		api := newProcess(t, otelcairnq.Options{})
		wrk := newProcess(t, otelcairnq.Options{})
		apiClient := api.client(t, open)
		wrkClient := wrk.client(t, open)

		ctx, request := api.tp.Tracer("test").Start(t.Context(), "POST /signup")
		task, err := apiClient.Submit(ctx, "send_email", map[string]string{"to": "a@example.com"}, &cairnq.SubmitOptions{
			Queue: "emails", Metadata: map[string]any{"tenant": "acme"}, CorrelationID: "signup-7",
		})
		request.End()
		if err != nil {
			t.Fatal(err)
		}

		var inHandler atomic.Value // the span context the handler ran in
		w := wrk.runWorker(t, wrkClient, cairnq.WorkerOptions{Queues: []string{"emails"}, Logger: quiet}, func(w *cairnq.Worker) error {
			return w.Handle("send_email", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				inHandler.Store(trace.SpanContextFromContext(ctx))
				// A child task submitted from the handler continues the trace.
				_, err := tc.Submit(ctx, "audit", nil, nil)
				return "sent", err
			}, nil)
		})
		if got := wait(t, apiClient, task.ID); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("task %s, want succeeded", got.Status)
		}

		producers := api.waitSpans(t, trace.SpanKindProducer, 1)
		submit := producers[0]
		if submit.Name() != "submit emails" {
			t.Errorf("producer span %q, want %q", submit.Name(), "submit emails")
		}
		if submit.Parent().SpanID() != request.SpanContext().SpanID() || submit.SpanContext().TraceID() != request.SpanContext().TraceID() {
			t.Errorf("submit span's parent %v, want the request span %v", submit.Parent(), request.SpanContext())
		}
		wantAttrs(t, "submit span", submit.Attributes(),
			semconv.MessagingSystemKey.String("cairnq"),
			semconv.MessagingDestinationName("emails"),
			semconv.MessagingMessageID(task.ID),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("submit"),
			semconv.MessagingMessageConversationID("signup-7"),
			otelcairnq.AttrTaskName.String("send_email"),
		)

		// The metadata: the caller's keys kept, the trace context beside
		// them in the documented form.
		stored, err := wrkClient.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Tenant string            `json:"tenant"`
			Trace  map[string]string `json:"trace"`
		}
		if err := json.Unmarshal(stored.Metadata, &md); err != nil {
			t.Fatalf("metadata %s: %v", stored.Metadata, err)
		}
		wantParent := fmt.Sprintf("00-%s-%s-01", submit.SpanContext().TraceID(), submit.SpanContext().SpanID())
		if md.Tenant != "acme" || md.Trace["traceparent"] != wantParent || len(md.Trace) != 1 {
			t.Errorf("metadata %s, want tenant acme and trace.traceparent %s alone", stored.Metadata, wantParent)
		}

		consumers := wrk.waitSpans(t, trace.SpanKindConsumer, 1)
		process := consumers[0]
		if process.Name() != "process emails" {
			t.Errorf("consumer span %q, want %q", process.Name(), "process emails")
		}
		if process.SpanContext().TraceID() != submit.SpanContext().TraceID() {
			t.Errorf("attempt's trace %s, submit's %s: not one trace", process.SpanContext().TraceID(), submit.SpanContext().TraceID())
		}
		if process.Parent().SpanID() != submit.SpanContext().SpanID() || !process.Parent().IsRemote() {
			t.Errorf("attempt's parent %v, want the submit span %s, remote", process.Parent(), submit.SpanContext().SpanID())
		}
		if got, _ := inHandler.Load().(trace.SpanContext); !got.Equal(process.SpanContext()) {
			t.Errorf("handler ran in span %v, want the attempt's %v", got, process.SpanContext())
		}
		child := wrk.waitSpans(t, trace.SpanKindProducer, 1)[0]
		if child.Parent().SpanID() != process.SpanContext().SpanID() || child.SpanContext().TraceID() != submit.SpanContext().TraceID() {
			t.Errorf("the handler's child submit has parent %v, want the attempt's span %v", child.Parent(), process.SpanContext())
		}
		wantAttrs(t, "attempt span", process.Attributes(),
			semconv.MessagingSystemKey.String("cairnq"),
			semconv.MessagingDestinationName("emails"),
			semconv.MessagingMessageID(task.ID),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingClientID(w.ID()),
			semconv.MessagingMessageConversationID("signup-7"),
			otelcairnq.AttrTaskName.String("send_email"),
			otelcairnq.AttrTaskAttempt.Int(1),
			otelcairnq.AttrTaskOutcome.String("succeeded"),
		)
		if process.Status().Code == codes.Error {
			t.Errorf("succeeded attempt has status %v", process.Status())
		}

		emails := []attribute.KeyValue{semconv.MessagingDestinationName("emails"), otelcairnq.AttrTaskName.String("send_email")}
		apiMetrics, wrkMetrics := api.collect(t), wrk.collect(t)
		if n := sum(apiMetrics, otelcairnq.MetricSubmitted, emails...); n != 1 {
			t.Errorf("submitted = %d in the API process, want 1", n)
		}
		if n := sum(wrkMetrics, otelcairnq.MetricSubmitted, emails...); n != 0 {
			t.Errorf("submitted = %d in the worker process, want 0", n)
		}
		succeeded := append(emails, otelcairnq.AttrTaskOutcome.String("succeeded"))
		if n := sum(wrkMetrics, otelcairnq.MetricSettled, succeeded...); n != 1 {
			t.Errorf("settled{succeeded} = %d, want 1", n)
		}
		if n, _ := histCount(wrkMetrics, otelcairnq.MetricDuration, succeeded...); n != 1 {
			t.Errorf("duration count = %d, want 1", n)
		}
		if n, _ := histCount(wrkMetrics, otelcairnq.MetricQueueTime, emails...); n != 1 {
			t.Errorf("queue_time count = %d, want 1", n)
		}
	})
}

// A retryable failure is retried, a panic on the last attempt and a
// non-retryable TaskError fail; each attempt's span says so with the
// envelope the worker then records, and the metrics count them.
func TestFailedAttempts(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		api := newProcess(t, otelcairnq.Options{})
		wrk := newProcess(t, otelcairnq.Options{})
		apiClient := api.client(t, open)
		wrkClient := wrk.client(t, open)

		flaky, err := apiClient.Submit(t.Context(), "flaky", nil, &cairnq.SubmitOptions{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		bad, err := apiClient.Submit(t.Context(), "bad", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		wrk.runWorker(t, wrkClient, cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff, Logger: quiet}, func(w *cairnq.Worker) error {
			if err := w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				if tc.Attempt() == 1 {
					return nil, errors.New("smtp: connection refused")
				}
				panic("nil map")
			}, nil); err != nil {
				return err
			}
			return w.Handle("bad", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				return nil, &cairnq.TaskError{Type: "InvalidAddress", Code: "invalid_address", Message: "no @"}
			}, nil)
		})
		flakyDone, badDone := wait(t, apiClient, flaky.ID), wait(t, apiClient, bad.ID)
		if flakyDone.Status != cairnq.StatusFailed || flakyDone.Attempt != 2 || badDone.Status != cairnq.StatusFailed || badDone.Attempt != 1 {
			t.Fatalf("flaky %s after %d, bad %s after %d; want both failed, after 2 and 1",
				flakyDone.Status, flakyDone.Attempt, badDone.Status, badDone.Attempt)
		}

		submits := map[string]trace.SpanContext{}
		for _, s := range api.waitSpans(t, trace.SpanKindProducer, 2) {
			submits[attrs(s.Attributes())[semconv.MessagingMessageIDKey].AsString()] = s.SpanContext()
		}
		type key struct {
			id      string
			attempt int64
		}
		spans := map[key]sdktrace.ReadOnlySpan{}
		for _, s := range wrk.waitSpans(t, trace.SpanKindConsumer, 3) {
			a := attrs(s.Attributes())
			id := a[semconv.MessagingMessageIDKey].AsString()
			spans[key{id, a[otelcairnq.AttrTaskAttempt].AsInt64()}] = s
			if s.Parent().SpanID() != submits[id].SpanID() || s.SpanContext().TraceID() != submits[id].TraceID() {
				t.Errorf("attempt of %s: parent %v, want its submit %v", id, s.Parent(), submits[id])
			}
			if s.Status().Code != codes.Error {
				t.Errorf("failed attempt of %s: status %v, want Error", id, s.Status())
			}
		}
		for _, c := range []struct {
			key           key
			outcome, typ  string
			code          string
			recordedBelow *cairnq.Task // the worker's record of the last attempt
		}{
			{key{flaky.ID, 1}, "retried", "Error", "handler_error", nil},
			{key{flaky.ID, 2}, "failed", "Panic", "handler_panic", flakyDone},
			{key{bad.ID, 1}, "failed", "InvalidAddress", "invalid_address", badDone},
		} {
			s, ok := spans[c.key]
			if !ok {
				t.Errorf("no span for attempt %d of %s", c.key.attempt, c.key.id)
				continue
			}
			wantAttrs(t, fmt.Sprintf("attempt %d of %s", c.key.attempt, c.key.id), s.Attributes(),
				otelcairnq.AttrTaskOutcome.String(c.outcome),
				semconv.ErrorTypeKey.String(c.typ),
				otelcairnq.AttrErrorCode.String(c.code))
			if r := c.recordedBelow; r != nil && (r.Error == nil || r.Error.Type != c.typ || r.Error.Code != c.code) {
				t.Errorf("the worker recorded %+v for %s, the span says %s/%s", r.Error, c.key.id, c.typ, c.code)
			}
		}

		m := wrk.collect(t)
		flakyAttrs := []attribute.KeyValue{semconv.MessagingDestinationName("default"), otelcairnq.AttrTaskName.String("flaky")}
		badAttrs := []attribute.KeyValue{semconv.MessagingDestinationName("default"), otelcairnq.AttrTaskName.String("bad")}
		for _, c := range []struct {
			name string
			got  int64
			want int64
		}{
			{"settled{flaky,retried}", sum(m, otelcairnq.MetricSettled, append(flakyAttrs, otelcairnq.AttrTaskOutcome.String("retried"))...), 1},
			{"settled{flaky,failed}", sum(m, otelcairnq.MetricSettled, append(flakyAttrs, otelcairnq.AttrTaskOutcome.String("failed"))...), 1},
			{"settled{flaky,succeeded}", sum(m, otelcairnq.MetricSettled, append(flakyAttrs, otelcairnq.AttrTaskOutcome.String("succeeded"))...), 0},
			{"settled{bad,failed}", sum(m, otelcairnq.MetricSettled, append(badAttrs, otelcairnq.AttrTaskOutcome.String("failed"))...), 1},
			{"retried{flaky}", sum(m, otelcairnq.MetricRetried, flakyAttrs...), 1},
			{"retried{bad}", sum(m, otelcairnq.MetricRetried, badAttrs...), 0},
			{"lease_lost{flaky}", sum(m, otelcairnq.MetricLeaseLost, flakyAttrs...), 0},
		} {
			if c.got != c.want {
				t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
			}
		}
		if n, _ := histCount(m, otelcairnq.MetricQueueTime, flakyAttrs...); n != 2 {
			t.Errorf("queue_time{flaky} count = %d, want 2 (one per attempt)", n)
		}
		if n, _ := histCount(m, otelcairnq.MetricDuration, append(flakyAttrs, otelcairnq.AttrTaskOutcome.String("retried"))...); n != 1 {
			t.Errorf("duration{flaky,retried} count = %d, want 1", n)
		}
	})
}

// With Link, the attempt starts a trace of its own, linked to the submit;
// the metadata key is the one configured.
func TestLinkInsteadOfParent(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		api := newProcess(t, otelcairnq.Options{MetadataKey: "otel"})
		wrk := newProcess(t, otelcairnq.Options{MetadataKey: "otel", Link: true})
		apiClient := api.client(t, open)
		wrkClient := wrk.client(t, open)

		task, err := apiClient.Submit(t.Context(), "report", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]map[string]string
		if err := json.Unmarshal(task.Metadata, &md); err != nil || md["otel"]["traceparent"] == "" {
			t.Fatalf("metadata %s: want the trace context under \"otel\" (%v)", task.Metadata, err)
		}
		wrk.runWorker(t, wrkClient, cairnq.WorkerOptions{Logger: quiet}, func(w *cairnq.Worker) error {
			return w.Handle("report", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
		})
		wait(t, apiClient, task.ID)

		submit := api.waitSpans(t, trace.SpanKindProducer, 1)[0].SpanContext()
		process := wrk.waitSpans(t, trace.SpanKindConsumer, 1)[0]
		if process.Parent().IsValid() || process.SpanContext().TraceID() == submit.TraceID() {
			t.Errorf("attempt span has parent %v in trace %s; want a root span of another trace than %s",
				process.Parent(), process.SpanContext().TraceID(), submit.TraceID())
		}
		links := process.Links()
		if len(links) != 1 || !sameSpan(links[0].SpanContext, submit) {
			t.Errorf("attempt span's links %+v, want one to the submit span %v", links, submit)
		}
	})
}

// A batch call is one span linked to every task's submit span.
func TestBatchLinksEveryTask(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		api := newProcess(t, otelcairnq.Options{})
		wrk := newProcess(t, otelcairnq.Options{})
		apiClient := api.client(t, open)
		wrkClient := wrk.client(t, open)

		var ids []string
		for i := range 3 {
			// Each submit in a request of its own: three traces.
			ctx, request := api.tp.Tracer("test").Start(t.Context(), fmt.Sprintf("request %d", i))
			task, err := apiClient.Submit(ctx, "resize", i, nil)
			request.End()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		wrk.runWorker(t, wrkClient, cairnq.WorkerOptions{Logger: quiet}, func(w *cairnq.Worker) error {
			return w.HandleBatch("resize", 3, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
				return nil, nil
			}, nil)
		})
		for _, id := range ids {
			wait(t, apiClient, id)
		}

		submits := map[string]trace.SpanContext{}
		for _, s := range api.waitSpans(t, trace.SpanKindProducer, 3) {
			submits[attrs(s.Attributes())[semconv.MessagingMessageIDKey].AsString()] = s.SpanContext()
		}
		if len(submits) != 3 || submits[ids[0]].TraceID() == submits[ids[1]].TraceID() {
			t.Fatalf("submit spans %v: want three, in three traces", submits)
		}
		process := wrk.waitSpans(t, trace.SpanKindConsumer, 1)[0]
		a := attrs(process.Attributes())
		if _, ok := a[semconv.MessagingMessageIDKey]; ok {
			t.Errorf("batch span has a message id %s", a[semconv.MessagingMessageIDKey].Emit())
		}
		wantAttrs(t, "batch span", process.Attributes(),
			semconv.MessagingBatchMessageCount(3), otelcairnq.AttrTaskOutcome.String("succeeded"))
		if len(process.Links()) != 3 {
			t.Fatalf("batch span has %d links, want 3", len(process.Links()))
		}
		for _, l := range process.Links() {
			la := attrs(l.Attributes)
			id := la[semconv.MessagingMessageIDKey].AsString()
			if !sameSpan(l.SpanContext, submits[id]) || la[otelcairnq.AttrTaskAttempt].AsInt64() != 1 {
				t.Errorf("link %v (task %q, attempt %d), want task %s's submit span %v on attempt 1",
					l.SpanContext, id, la[otelcairnq.AttrTaskAttempt].AsInt64(), id, submits[id])
			}
		}
		m := wrk.collect(t)
		resize := []attribute.KeyValue{semconv.MessagingDestinationName("default"), otelcairnq.AttrTaskName.String("resize")}
		if n := sum(m, otelcairnq.MetricSettled, append(resize, otelcairnq.AttrTaskOutcome.String("succeeded"))...); n != 3 {
			t.Errorf("settled{resize,succeeded} = %d, want 3", n)
		}
	})
}

// An attempt abandoned at MaxRun has lost its lease by the time its
// handler returns.
func TestLeaseLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		wrk := newProcess(t, otelcairnq.Options{})
		c := wrk.client(t, open)
		task, err := c.Submit(t.Context(), "slow", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		wrk.runWorker(t, c, cairnq.WorkerOptions{MaxRun: 100 * time.Millisecond, Logger: quiet}, func(w *cairnq.Worker) error {
			return w.Handle("slow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}, nil)
		})
		if got := wait(t, c, task.ID); got.Status != cairnq.StatusFailed {
			t.Fatalf("task %s, want failed", got.Status)
		}
		process := wrk.waitSpans(t, trace.SpanKindConsumer, 1)[0]
		wantAttrs(t, "attempt span", process.Attributes(),
			otelcairnq.AttrTaskOutcome.String("lease_lost"), semconv.ErrorTypeKey.String("lease_lost"))
		if process.Status().Code != codes.Error {
			t.Errorf("status %v, want Error", process.Status())
		}
		m := wrk.collect(t)
		slow := []attribute.KeyValue{semconv.MessagingDestinationName("default"), otelcairnq.AttrTaskName.String("slow")}
		if n := sum(m, otelcairnq.MetricLeaseLost, slow...); n != 1 {
			t.Errorf("lease_lost = %d, want 1", n)
		}
		if n := sum(m, otelcairnq.MetricSettled, append(slow, otelcairnq.AttrTaskOutcome.String("lease_lost"))...); n != 1 {
			t.Errorf("settled{lease_lost} = %d, want 1", n)
		}
	})
}

// A handler that calls runtime.Goexit settles nothing: the worker leaves
// its task to its lease, and the attempt reads lease_lost, not succeeded.
func TestGoexitReadsLeaseLost(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		wrk := newProcess(t, otelcairnq.Options{})
		c := wrk.client(t, open)
		task, err := c.Submit(t.Context(), "exits", nil, &cairnq.SubmitOptions{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		opts := cairnq.WorkerOptions{LeaseDuration: cairnq.MinLeaseDuration, RetryBackoff: cairnq.NoRetryBackoff, Logger: quiet,
			OnError: func(error, cairnq.ErrorPhase, string) {}}
		wrk.runWorker(t, c, opts, func(w *cairnq.Worker) error {
			return w.Handle("exits", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				if tc.Attempt() == 1 {
					runtime.Goexit()
				}
				return "second", nil
			}, nil)
		})
		if got := wait(t, c, task.ID); got.Status != cairnq.StatusSucceeded || got.Attempt != 2 {
			t.Fatalf("task %s on attempt %d, want succeeded on attempt 2", got.Status, got.Attempt)
		}
		spans := wrk.waitSpans(t, trace.SpanKindConsumer, 2)
		outcomes := map[string]int{}
		for _, s := range spans {
			for _, a := range s.Attributes() {
				if a.Key == otelcairnq.AttrTaskOutcome {
					outcomes[a.Value.AsString()]++
					if a.Value.AsString() == otelcairnq.OutcomeLeaseLost && s.Status().Code != codes.Error {
						t.Errorf("the Goexit's span: status %v, want Error", s.Status())
					}
				}
			}
		}
		if outcomes[otelcairnq.OutcomeLeaseLost] != 1 || outcomes[otelcairnq.OutcomeSucceeded] != 1 {
			t.Errorf("span outcomes %v, want one lease_lost (the Goexit) and one succeeded", outcomes)
		}
	})
}

// The depth gauge reports every queue and status, from one Stats read per
// collection, and nothing once unregistered.
func TestDepthGauge(t *testing.T) {
	eachBackend(t, func(t *testing.T, open opener) {
		p := newProcess(t, otelcairnq.Options{})
		c := p.client(t, open)
		for _, q := range []string{"a", "a", "b", "b"} {
			if _, err := c.Submit(t.Context(), "job", nil, &cairnq.SubmitOptions{Queue: q}); err != nil {
				t.Fatal(err)
			}
		}
		last, err := c.Submit(t.Context(), "job", nil, &cairnq.SubmitOptions{Queue: "b"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Cancel(t.Context(), last.ID); err != nil {
			t.Fatal(err)
		}

		counting := &countingStats{c: c}
		unregister, err := otelcairnq.RegisterDepthFrom(p.tel, counting)
		if err != nil {
			t.Fatal(err)
		}
		points := gauge(p.collect(t), otelcairnq.MetricDepth)
		if n := counting.calls.Load(); n != 1 {
			t.Errorf("one collection read Stats %d times, want 1", n)
		}
		want := map[[2]string]int64{}
		for _, q := range []string{"a", "b"} {
			for _, s := range []string{"queued", "running", "succeeded", "failed", "canceled"} {
				want[[2]string{q, s}] = 0
			}
		}
		want[[2]string{"a", "queued"}] = 2
		want[[2]string{"b", "queued"}] = 2
		want[[2]string{"b", "canceled"}] = 1
		if len(points) != len(want) {
			t.Errorf("%d depth points, want %d", len(points), len(want))
		}
		for qs, n := range want {
			set := attribute.NewSet(semconv.MessagingDestinationName(qs[0]), otelcairnq.AttrTaskStatus.String(qs[1]))
			if got, ok := points[set.Equivalent()]; !ok || got != n {
				t.Errorf("depth{%s,%s} = %d (present %v), want %d", qs[0], qs[1], got, ok, n)
			}
		}

		if err := unregister(); err != nil {
			t.Fatal(err)
		}
		if points := gauge(p.collect(t), otelcairnq.MetricDepth); len(points) != 0 {
			t.Errorf("%d depth points after unregister, want none", len(points))
		}
		if n := counting.calls.Load(); n != 1 {
			t.Errorf("Stats read %d times after unregister, want still 1", n)
		}

		// The exported registration reads the client itself.
		unregister, err = p.tel.RegisterDepth(c)
		if err != nil {
			t.Fatal(err)
		}
		defer unregister()
		points = gauge(p.collect(t), otelcairnq.MetricDepth)
		a := attribute.NewSet(semconv.MessagingDestinationName("a"), otelcairnq.AttrTaskStatus.String("queued"))
		if points[a.Equivalent()] != 2 {
			t.Errorf("depth{a,queued} = %d through RegisterDepth, want 2", points[a.Equivalent()])
		}
	})
}

type countingStats struct {
	c     *cairnq.Client
	calls atomic.Int64
}

func (s *countingStats) Stats(ctx context.Context, queue string) (map[string]cairnq.StatusCounts, error) {
	s.calls.Add(1)
	return s.c.Stats(ctx, queue)
}

// sameSpan reports whether a and b name one span, remote or not.
func sameSpan(a, b trace.SpanContext) bool {
	return a.IsValid() && a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}
