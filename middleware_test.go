package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/faulttest"
)

type ctxKey struct{}

// recorder collects the steps of middleware and handlers, in order.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, fmt.Sprintf(format, a...))
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// tagging returns a middleware recording its name around next and adding
// it to the context's chain.
func tagging(rec *recorder, name string) cairnq.Middleware {
	return func(ctx context.Context, call *cairnq.Call, next func(context.Context) (any, error)) (any, error) {
		chain, _ := ctx.Value(ctxKey{}).(string)
		rec.add("%s before %s batch=%v n=%d", name, call.Tasks[0].Name(), call.Batch, len(call.Tasks))
		res, err := next(context.WithValue(ctx, ctxKey{}, chain+name))
		rec.add("%s after err=%v", name, err)
		return res, err
	}
}

func TestMiddlewareWrapsHandlersInDeclaredOrder(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		rec := &recorder{}
		w := newWorker(t, c, &cairnq.WorkerOptions{Middleware: []cairnq.Middleware{tagging(rec, "A"), tagging(rec, "B")}})
		w.Handle("one", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			rec.add("handler one chain=%v", ctx.Value(ctxKey{}))
			return "r", nil
		}, nil)
		w.HandleBatch("many", 3, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			rec.add("handler many chain=%v n=%d", ctx.Value(ctxKey{}), len(tcs))
			out := map[string]any{}
			for _, tc := range tcs {
				out[tc.ID()] = tc.ID()
			}
			return out, nil
		}, nil)
		var batch []*cairnq.Task
		for range 3 {
			bt, err := c.Submit(ctx, "many", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, bt)
		}
		one, err := c.Submit(ctx, "one", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		if got := waitTask(t, c, one.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"r"` {
			t.Fatalf("one: %s %s", got.Status, got.Result)
		}
		for _, bt := range batch {
			if got := waitTask(t, c, bt.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"`+bt.ID+`"` {
				t.Fatalf("batch task: %s %s", got.Status, got.Result)
			}
		}
		steps := rec.get()
		want := []string{"A before one batch=false n=1", "B before one batch=false n=1", "handler one chain=AB", "B after err=<nil>", "A after err=<nil>"}
		if i := slices.Index(steps, want[0]); i < 0 || !slices.Equal(steps[i:i+len(want)], want) {
			t.Errorf("single call steps:\n%s", strings.Join(steps, "\n"))
		}
		// The batch may come in more than one call; each is wrapped whole.
		var batched int
		for i, s := range steps {
			if strings.HasPrefix(s, "A before many batch=true") {
				if !strings.HasPrefix(steps[i+1], "B before many batch=true") || !strings.HasPrefix(steps[i+2], "handler many chain=AB") {
					t.Errorf("batch call steps:\n%s", strings.Join(steps, "\n"))
				}
				var n int
				fmt.Sscanf(steps[i+2], "handler many chain=AB n=%d", &n)
				batched += n
			}
		}
		if batched != 3 {
			t.Errorf("batch calls ran %d tasks, want 3:\n%s", batched, strings.Join(steps, "\n"))
		}
	})
}

func TestMiddlewareDecidesTheOutcome(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var ran sync.Map // task names whose handler ran
		mw := func(ctx context.Context, call *cairnq.Call, next func(context.Context) (any, error)) (any, error) {
			tc := call.Tasks[0]
			switch tc.Name() {
			case "refused":
				return nil, cairnq.Permanent(errors.New("refused by middleware"))
			case "rescued":
				if _, err := next(ctx); err != nil {
					return map[string]string{"rescued": err.Error()}, nil
				}
				return nil, errors.New("expected a failure to rescue")
			case "panics":
				panic("middleware boom")
			case "batch":
				if _, err := next(ctx); err != nil {
					return nil, err
				}
				return "not a map", nil
			}
			return next(ctx)
		}
		w := newWorker(t, c, &cairnq.WorkerOptions{Middleware: []cairnq.Middleware{mw}})
		for _, name := range []string{"refused", "rescued", "panics"} {
			w.Handle(name, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				ran.Store(tc.Name(), true)
				return nil, errors.New("handler failed")
			}, nil)
		}
		w.HandleBatch("batch", 2, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			return map[string]any{tcs[0].ID(): "dropped"}, nil
		}, nil)
		submit := func(name string) *cairnq.Task {
			t.Helper()
			task, err := c.Submit(ctx, name, nil, &cairnq.SubmitOptions{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		refused, rescued, panics, batch := submit("refused"), submit("rescued"), submit("panics"), submit("batch")
		startWorker(t, w)

		got := waitTask(t, c, refused.ID)
		if got.Status != cairnq.StatusFailed || got.Error == nil || got.Error.Message != "refused by middleware" || got.Error.Retryable {
			t.Errorf("refused: %s %+v", got.Status, got.Error)
		}
		if _, ok := ran.Load("refused"); ok {
			t.Error("the handler ran although the middleware did not call next")
		}
		if got := waitTask(t, c, rescued.ID); got.Status != cairnq.StatusSucceeded || !faulttest.SameJSON(got.Result, `{"rescued":"handler failed"}`) {
			t.Errorf("rescued: %s %s", got.Status, got.Result)
		}
		if got := waitTask(t, c, panics.ID); got.Status != cairnq.StatusFailed || got.Error == nil || got.Error.Code != "handler_panic" {
			t.Errorf("panics: %s %+v", got.Status, got.Error)
		}
		if got := waitTask(t, c, batch.ID); got.Status != cairnq.StatusSucceeded || (got.Result != nil && string(got.Result) != "null") {
			t.Errorf("batch with a non-map result: %s %s", got.Status, got.Result)
		}
	})
}

// metadataHook adds key=value to every submit's metadata and records the
// task each submit stored.
func metadataHook(rec *recorder, key, value string) cairnq.SubmitHook {
	return func(ctx context.Context, s *cairnq.Submission, next func(context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		if err := s.SetMetadata(key, value); err != nil {
			return nil, err
		}
		rec.add("%s before %s", key, s.Name)
		task, err := next(ctx)
		if err == nil {
			rec.add("%s after %s", key, task.Name)
		}
		return task, err
	}
}

func TestSubmitHooksAddMetadataAndRefuse(t *testing.T) {
	rec := &recorder{}
	refuse := func(ctx context.Context, s *cairnq.Submission, next func(context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		if s.Name == "forbidden" {
			return nil, errors.New("forbidden by hook")
		}
		return next(ctx)
	}
	opts := &cairnq.Options{SubmitHooks: []cairnq.SubmitHook{metadataHook(rec, "outer", "1"), refuse, metadataHook(rec, "inner", "2")}}
	onBothBackends(t, opts, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		rec.steps = nil
		callerMeta := map[string]any{"own": "kept"}
		task, err := c.Submit(ctx, "allowed", nil, &cairnq.SubmitOptions{Metadata: callerMeta})
		if err != nil {
			t.Fatal(err)
		}
		if len(callerMeta) != 1 {
			t.Errorf("the caller's metadata map changed: %v", callerMeta)
		}
		stored, err := c.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]string
		if err := json.Unmarshal(stored.Metadata, &md); err != nil || md["own"] != "kept" || md["outer"] != "1" || md["inner"] != "2" {
			t.Errorf("metadata %s (%v)", stored.Metadata, err)
		}
		want := []string{"outer before allowed", "inner before allowed", "inner after allowed", "outer after allowed"}
		if got := rec.get(); !slices.Equal(got, want) {
			t.Errorf("hook order %q, want %q", got, want)
		}

		if _, err := c.Submit(ctx, "forbidden", nil, nil); err == nil || err.Error() != "forbidden by hook" {
			t.Errorf("refused submit: %v", err)
		}
		if n := countTasks(t, c); n != 1 {
			t.Errorf("%d tasks after a refused submit, want 1", n)
		}

		// Submits made through other paths pass the hooks too.
		w := newWorker(t, c, nil)
		w.Handle("parent", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			child, err := tc.Submit(ctx, "child", nil, nil)
			if err != nil {
				return nil, err
			}
			return child.ID, nil
		}, nil)
		w.Handle("child", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
		startWorker(t, w)
		parent, err := c.Call(ctx, "parent", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var childID string
		if err := json.Unmarshal(parent.Result, &childID); err != nil {
			t.Fatal(err)
		}
		child, err := c.Get(ctx, childID)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range []*cairnq.Task{parent, child} {
			if err := json.Unmarshal(task.Metadata, &md); err != nil || md["outer"] != "1" || md["inner"] != "2" {
				t.Errorf("%s metadata %s", task.Name, task.Metadata)
			}
		}
	})
}

func TestSubmissionSetMetadataNeedsAnObject(t *testing.T) {
	for _, md := range []any{[]int{1}, json.RawMessage(`"text"`), 3, func() {}} {
		s := &cairnq.Submission{Name: "x", Options: cairnq.SubmitOptions{Metadata: md}}
		err := s.SetMetadata("k", "v")
		var ae *cairnq.ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("metadata %T: %v, want an *ArgumentError", md, err)
		}
	}
	s := &cairnq.Submission{Options: cairnq.SubmitOptions{Metadata: json.RawMessage(`{"a":1}`)}}
	if err := s.SetMetadata("b", 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s.Options.Metadata); string(got) != `{"a":1,"b":2}` {
		t.Errorf("metadata %s", got)
	}
}

func TestNilHooksAndMiddlewareAreArgumentErrors(t *testing.T) {
	_, err := cairnq.Open(context.Background(), t.TempDir()+"/t.db", &cairnq.SQLiteOptions{Options: cairnq.Options{SubmitHooks: []cairnq.SubmitHook{nil}}})
	if !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("nil submit hook: %v", err)
	}
	c := openTemp(t, nil)
	if _, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Middleware: []cairnq.Middleware{nil}}); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("nil middleware: %v", err)
	}
	if _, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{DurableStepMiddleware: []cairnq.DurableStepMiddleware{nil}}); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("nil step middleware: %v", err)
	}
}

func TestEnvelopeOf(t *testing.T) {
	for _, tc := range []struct {
		err        error
		typ, code  string
		retryable  bool
		wantZeroed bool
	}{
		{err: nil, wantZeroed: true},
		{err: errors.New("plain"), typ: "Error", code: "handler_error", retryable: true},
		{err: cairnq.Permanent(errors.New("bad input")), typ: "Error", code: "handler_error", retryable: false},
		{err: &cairnq.TaskError{Type: "Quota", Code: "over_quota", Message: "m", Retryable: true}, typ: "Quota", code: "over_quota", retryable: true},
		{err: fmt.Errorf("wrapped: %w", &cairnq.TaskError{Code: "c"}), typ: "TaskError", code: "c", retryable: false},
	} {
		env := cairnq.EnvelopeOf(tc.err)
		if tc.wantZeroed {
			if env.Type != "" || env.Code != "" {
				t.Errorf("EnvelopeOf(nil) = %+v", env)
			}
			continue
		}
		if env.Type != tc.typ || env.Code != tc.code || env.Retryable != tc.retryable {
			t.Errorf("EnvelopeOf(%v) = %+v, want %s/%s retryable=%v", tc.err, env, tc.typ, tc.code, tc.retryable)
		}
	}
}
