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
package cairnqtest
