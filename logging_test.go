package cairnq_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
)

// logRecords is a slog.Handler keeping every record, at every level.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// logged is one record, flattened for assertions.
type logged struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logRecords) all() []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]logged, 0, len(h.records))
	for _, r := range h.records {
		l := logged{level: r.Level, msg: r.Message, attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			l.attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, l)
	}
	return out
}

// find returns the records with message msg about task id ("" for any).
func (h *logRecords) find(msg, id string) []logged {
	var out []logged
	for _, l := range h.all() {
		if l.msg == msg && (id == "" || l.attrs["task_id"] == id) {
			out = append(out, l)
		}
	}
	return out
}

func TestWorkerLogVocabulary(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		rec := &logRecords{}
		w := newWorker(t, c, &cairnq.WorkerOptions{
			Logger: slog.New(rec), RetryBackoff: cairnq.NoRetryBackoff, MaxRun: 200 * time.Millisecond,
		})
		w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Attempt() == 1 {
				return nil, errors.New("first try fails")
			}
			return nil, nil
		}, nil)
		w.Handle("doomed", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, &cairnq.TaskError{Type: "Quota", Code: "over_quota", Message: "no"}
		}, nil)
		w.Handle("stuck", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			<-ctx.Done() // until MaxRun abandons the attempt
			return nil, ctx.Err()
		}, nil)
		w.Handle("fine", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return 1, nil }, nil)
		submit := func(name string, attempts int) *cairnq.Task {
			t.Helper()
			task, err := c.Submit(ctx, name, nil, &cairnq.SubmitOptions{MaxAttempts: attempts})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		flaky, doomed, stuck, fine := submit("flaky", 3), submit("doomed", 3), submit("stuck", 1), submit("fine", 1)
		stop := startWorker(t, w)
		for _, task := range []*cairnq.Task{flaky, doomed, stuck, fine} {
			waitTask(t, c, task.ID)
		}
		stop()

		started := rec.find("cairnq: worker started", "")
		if len(started) != 1 || started[0].level != slog.LevelInfo || started[0].attrs["worker_id"] != w.ID() {
			t.Errorf("worker started: %+v", started)
		}
		if stopped := rec.find("cairnq: worker stopped", ""); len(stopped) != 1 || stopped[0].level != slog.LevelInfo {
			t.Errorf("worker stopped: %+v", stopped)
		}
		retry := rec.find("cairnq: task attempt failed; will retry", flaky.ID)
		if len(retry) != 1 || retry[0].level != slog.LevelWarn || retry[0].attrs["attempt"] != "1" ||
			retry[0].attrs["task_name"] != "flaky" || retry[0].attrs["queue"] != cairnq.DefaultQueue ||
			retry[0].attrs["error"] != "first try fails" || retry[0].attrs["retry_in"] == "" {
			t.Errorf("retry of flaky: %+v", retry)
		}
		failed := rec.find("cairnq: task failed", doomed.ID)
		if len(failed) != 1 || failed[0].level != slog.LevelWarn || failed[0].attrs["error_type"] != "Quota" || failed[0].attrs["error_code"] != "over_quota" {
			t.Errorf("doomed failure: %+v", failed)
		}
		if lost := rec.find("cairnq: task lease lost", stuck.ID); len(lost) != 1 || lost[0].level != slog.LevelWarn {
			t.Errorf("stuck lease lost: %+v", lost)
		}
		if f := rec.find("cairnq: task failed", stuck.ID); len(f) != 1 || f[0].attrs["error_code"] != "handler_timeout" {
			t.Errorf("stuck failure: %+v", f)
		}
		// Nothing at info or above names a task that succeeded.
		for _, l := range rec.all() {
			if l.level >= slog.LevelInfo && slices.Contains([]string{fine.ID}, l.attrs["task_id"]) {
				t.Errorf("a success logged at %v: %s %v", l.level, l.msg, l.attrs)
			}
			if !strings.HasPrefix(l.msg, "cairnq: ") {
				t.Errorf("message without the cairnq prefix: %q", l.msg)
			}
		}
	})
}

// useDefaultHandler makes h slog.Default()'s handler for the test,
// restoring the default logger and the log package's output after it. A
// test calling it must not be parallel.
func useDefaultHandler(t *testing.T, h slog.Handler) {
	old, w, flags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() {
		slog.SetDefault(old)
		log.SetOutput(w)
		log.SetFlags(flags)
	})
}

// healthyRun is a first program's life: submit, one worker, wait, close.
// A handler that returns an error fails the task for good.
func healthyRun(t *testing.T, c *cairnq.Client, fail bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	task, err := c.Submit(ctx, "greet", map[string]string{"to": "ada"}, &cairnq.SubmitOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("greet", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if fail {
			return nil, errors.New("no greeting today")
		}
		return "hello", nil
	}, nil)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	done, err := c.Wait(ctx, task.ID, &cairnq.WaitOptions{Timeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]cairnq.Status{false: cairnq.StatusSucceeded, true: cairnq.StatusFailed}[fail]; done.Status != want {
		t.Fatalf("task %s, want %s", done.Status, want)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQuietByDefault: with no Logger a healthy program logs nothing, even
// to a default handler that takes every level; a warning still reaches that
// handler; and Logger: slog.Default() turns INFO on.
func TestQuietByDefault(t *testing.T) {
	rec := &logRecords{}
	useDefaultHandler(t, rec)
	msgs := func() []string {
		var out []string
		for _, l := range rec.all() {
			out = append(out, l.level.String()+" "+l.msg)
		}
		rec.mu.Lock()
		rec.records = nil
		rec.mu.Unlock()
		return out
	}
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		msgs()
		healthyRun(t, c, false)
		if got := msgs(); len(got) != 0 {
			t.Errorf("a healthy run with no Logger logged:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("warn reaches the default handler", func(t *testing.T) {
		msgs()
		healthyRun(t, openTemp(t, nil), true)
		if got := msgs(); !slices.Contains(got, "WARN cairnq: task failed") || slices.ContainsFunc(got, func(m string) bool {
			return !strings.HasPrefix(m, "WARN") && !strings.HasPrefix(m, "ERROR")
		}) {
			t.Errorf("want the task's failure at WARN and nothing below; got:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("Logger slog.Default turns INFO on", func(t *testing.T) {
		msgs()
		healthyRun(t, openTemp(t, &cairnq.Options{Logger: slog.Default()}), false)
		got := msgs()
		for _, want := range []string{"INFO cairnq: worker started", "INFO cairnq: worker stopped"} {
			if !slices.Contains(got, want) {
				t.Errorf("missing %q; got:\n%s", want, strings.Join(got, "\n"))
			}
		}
	})
}
