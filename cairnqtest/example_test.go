package cairnqtest_test

import (
	"context"
	"fmt"
	"os"
	"slices"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtest"
	"github.com/cairnq/cairnq-go/executor"
)

// exampleT stands in for the *testing.T a test function receives, so the
// examples can run as documentation; a test passes its t instead.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "cairnqtest-example")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// end runs the cleanups, last registered first, as a test's end does.
func (t *exampleT) end() {
	for _, f := range slices.Backward(t.cleanups) {
		f()
	}
}

// Welcome is the application's task: its payload type and its name.
type Welcome struct {
	UserID int    `json:"user_id"`
	Email  string `json:"email"`
}

var welcome = cairnq.Define[Welcome, string]("welcome_email")

// signUp is the application code under test: it submits a welcome email,
// once per user.
func signUp(ctx context.Context, c *cairnq.Client, id int, email string) error {
	_, err := welcome.Submit(ctx, c, Welcome{UserID: id, Email: email}, &cairnq.SubmitOptions{
		Queue: "mail", Key: fmt.Sprintf("welcome:%d", id),
	})
	return err
}

// A test of the code that submits a task, then of its handler.
func Example() {
	t := &exampleT{} // in a test: func TestSignUp(t *testing.T)
	defer t.end()
	ctx := context.Background()

	c := cairnqtest.NewClient(t, nil) // a SQLite file of the test's own
	if err := signUp(ctx, c, 42, "ada@example.com"); err != nil {
		t.Fatalf("signUp: %v", err)
	}
	_, p := cairnqtest.RequireSubmittedDef(ctx, t, c, welcome, &cairnqtest.Match{
		Queue:   "mail",
		Key:     "welcome:42",
		Payload: Welcome{UserID: 42, Email: "ada@example.com"},
	})
	fmt.Println("submitted for", p.Email)

	w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"mail"}})
	welcome.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p Welcome) (string, error) {
		return "sent to " + p.Email, nil
	}, nil)
	task := cairnqtest.Work(ctx, t, w) // claims, runs and settles one task
	var result string
	task.DecodeResult(&result)
	fmt.Println(task.Status, result)
	// Output:
	// submitted for ada@example.com
	// succeeded sent to ada@example.com
}

// Drain runs handlers until nothing is claimable, children included.
func ExampleDrain() {
	t := &exampleT{}
	defer t.end()
	ctx := context.Background()
	c := cairnqtest.NewClient(t, nil)

	w := cairnqtest.NewWorker(t, c, nil)
	w.Handle("order", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		_, err := tc.Submit(ctx, "invoice", nil, nil) // a child task
		return nil, err
	}, nil)
	w.Handle("invoice", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return "INV-1", nil
	}, nil)
	c.Submit(ctx, "order", nil, nil)

	for _, task := range cairnqtest.Drain(ctx, t, w) {
		fmt.Println(task.Name, task.Status)
	}
	cairnqtest.RequireNotSubmitted(ctx, t, c, "invoice", &cairnqtest.Match{Status: cairnq.StatusQueued})
	// Output:
	// order succeeded
	// invoice succeeded
}

// A handler's failure is settled as the worker settles it: queued again
// for a retry while attempts remain. The retry waits out its backoff
// (WorkerOptions.RetryBackoff), so it is not claimable at once unless the
// worker is set up with NoRetryBackoff.
func ExampleWork_retry() {
	t := &exampleT{}
	defer t.end()
	ctx := context.Background()
	c := cairnqtest.NewClient(t, nil)
	w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
	calls := 0
	w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		calls++
		if calls == 1 {
			return nil, fmt.Errorf("upstream timed out")
		}
		return "ok", nil
	}, nil)
	c.Submit(ctx, "flaky", nil, &cairnq.SubmitOptions{MaxAttempts: 3})

	first := cairnqtest.Work(ctx, t, w)
	fmt.Println(first.Status, first.Attempt, first.Error.Message)
	second := cairnqtest.Work(ctx, t, w)
	fmt.Println(second.Status, second.Attempt)
	// Output:
	// queued 1 upstream timed out
	// succeeded 2
}

// Against Postgres, a test hands in the executor it already has; the
// client lives in a schema of its own, dropped when the test ends.
func ExampleNewPostgresClient() {
	t := &exampleT{}
	defer t.end()
	var ex executor.Executor // the test's: cairnqpgx.New(pool, nil), sqlexec.New(db, nil), ...
	if ex == nil {
		return // no server in this example
	}
	ctx := context.Background()
	c := cairnqtest.NewPostgresClient(t, ex, nil)
	if err := signUp(ctx, c, 7, "bob@example.com"); err != nil {
		t.Fatalf("signUp: %v", err)
	}
	cairnqtest.RequireSubmitted(ctx, t, c, welcome.Name, &cairnqtest.Match{
		Payload: map[string]any{"user_id": 7, "email": "bob@example.com"},
	})
}
