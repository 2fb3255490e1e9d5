// Package cairnqtest helps an application test the code around its cairnq
// tasks: the code that submits them and the handlers that run them.
//
// It needs no server: NewClient opens a Client on a SQLite file in the
// test's temporary directory, closed when the test ends, so every test
// (parallel ones too) has a database of its own for a few milliseconds.
// Where a test already has a Postgres executor, NewPostgresClient opens a
// Client in a schema of its own on it, dropped when the test ends.
//
// Two kinds of helpers run on either:
//
//   - RequireSubmitted and RequireNotSubmitted (typed through a TaskDef:
//     RequireSubmittedDef, RequireNotSubmittedDef) assert what the code
//     under test submitted, by name and a Match on queue, key, priority,
//     status, parent and payload;
//   - Work runs the handler registered on a Worker for one claimable task,
//     and Drain runs handlers until nothing is claimable, both through the
//     worker's real path (the same claim statement, TaskContext, middleware
//     and settlement as Worker.Run, synchronously in the test's goroutine)
//     and returning the tasks as stored after they settled.
//
// A failed assertion calls the test's Fatalf with a message naming what
// was expected and what each candidate task held instead. The helpers take
// a TB, which *testing.T, *testing.B and *testing.F satisfy.
//
//	func TestSignUp(t *testing.T) {
//		ctx := t.Context()
//		c := cairnqtest.NewClient(t, nil) // a temporary SQLite file, closed at cleanup
//		if err := signUp(ctx, c, 42, "ada@example.com"); err != nil {
//			t.Fatal(err)
//		}
//		cairnqtest.RequireSubmittedDef(ctx, t, c, welcome, &cairnqtest.Match{
//			Queue: "mail", Key: "welcome:42", Payload: Welcome{UserID: 42, Email: "ada@example.com"},
//		})
//
//		w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"mail"}})
//		welcome.Handle(w, sendWelcome, nil)
//		task := cairnqtest.Work(ctx, t, w) // one task: claimed, run, settled
//		if task.Status != cairnq.StatusSucceeded {
//			t.Fatalf("%s: %v", task.Status, task.Error)
//		}
//	}
//
// # Assertions
//
// RequireSubmitted asserts that exactly one task of the name matches
// (queue, key, priority, status, parent, payload) and returns it;
// RequireNotSubmitted asserts that none does. A failure lists each task of
// the name and why it did not match. The payload compares as JSON (key
// order and number spelling do not matter); through a TaskDef
// (RequireSubmittedDef, RequireNotSubmittedDef) it compares as the
// payload type P.
//
// # Running handlers
//
// Work runs one handler call synchronously through the worker's own path
// (the claim Run makes, TaskContext, middleware, MaxRun, settlement, the
// heartbeat) and returns the task as stored after it settled: succeeded,
// failed, canceled, or queued again for a retry. WorkCall returns every
// task of a batch call; Drain runs calls until nothing is claimable and
// returns the settled tasks in the order they ran. Nothing claimable fails
// the test: a task submitted with a Delay, or waiting out a retry's
// backoff, is not due yet (cairnq.NoRetryBackoff makes retries due at
// once). The worker must not be running; when ctx ends, the call is
// abandoned as at a shutdown and the test fails.
//
// # Postgres
//
// NewPostgresClient runs the same helpers on the test's Postgres executor,
// in a schema of its own (cairnqtest_...) dropped at cleanup, so parallel
// tests sharing one pool see only their own tasks. The client sets
// search_path per transaction and leaves the pool's settings alone;
// PostgresSchema gives the scoped executor and the schema's name, for a
// transaction the test opens itself.
package cairnqtest
