package cairnq

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
)

// Call is one handler call as a Middleware sees it.
type Call struct {
	// Tasks are the call's tasks in claim order: one for a Handler, up to
	// the batch size for a BatchHandler.
	Tasks []*TaskContext
	// Batch reports whether a BatchHandler runs the call. Its result is
	// then the map of results by task id the BatchHandler returns.
	Batch bool
}

// Middleware wraps every handler call of a Worker, single and batch
// alike: it runs before the handler, calls next to run the rest of the
// chain and then the handler, and returns what the worker settles the
// call's tasks with. WorkerOptions.Middleware lists them outermost first:
// with [A, B], A calls next to reach B, and B's next runs the handler.
//
// A middleware may:
//   - give next a derived context (values, a deadline, a span), which the
//     handler receives;
//   - return without calling next, with an error, which settles the call's
//     tasks as a failed attempt like a handler's error (a *TaskError
//     chooses the envelope and whether to retry), or with a result, which
//     completes them;
//   - replace the result or the error next returned. For a batch call a
//     result other than a map[string]any (or nil) completes every task
//     with a null result.
//
// A panic in a middleware is recovered and recorded as the attempt's
// failure, as a handler's is. The tasks are settled after the outermost
// middleware returns, so a middleware observes the outcome the worker is
// about to record (EnvelopeOf names a failure the way the worker will),
// not the settlement itself. Writes through the TaskContexts are checked
// against the lease as in a handler.
type Middleware func(ctx context.Context, call *Call, next func(ctx context.Context) (any, error)) (any, error)

// chainMiddleware returns fn wrapped in mws, the first outermost.
func chainMiddleware(mws []Middleware, call *Call, fn func(ctx context.Context) (any, error)) func(ctx context.Context) (any, error) {
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], fn
		fn = func(ctx context.Context) (any, error) { return mw(ctx, call, next) }
	}
	return fn
}

// DurableStepCall is one durable step's run as a DurableStepMiddleware sees it.
type DurableStepCall struct {
	// Task is the context of the task whose step runs.
	Task *TaskContext
	// Name is the step's name, Position its place among the task's
	// steps (from 0).
	Name     string
	Position int
}

// DurableStepMiddleware wraps the function of every durable step that runs
// (Once; a step replayed from its record runs nothing and is not
// wrapped): it calls next to run the rest of the chain and then the
// step's function, giving next a derived context (a span, values) the
// function receives, and returns next's error or its own. An error it
// returns without calling next fails the step as the function's would.
// WorkerOptions.DurableStepMiddleware lists them outermost first.
type DurableStepMiddleware func(ctx context.Context, step *DurableStepCall, next func(ctx context.Context) error) error

// chainDurableSteps returns fn wrapped in mws, the first outermost.
func chainDurableSteps(mws []DurableStepMiddleware, step *DurableStepCall, fn func(ctx context.Context) error) func(ctx context.Context) error {
	for i := len(mws) - 1; i >= 0; i-- {
		mw, next := mws[i], fn
		fn = func(ctx context.Context) error { return mw(ctx, step, next) }
	}
	return fn
}

// Submission is one submit on its way to the database, as a SubmitHook
// sees it. A hook may change it before calling next: Options is the
// submit's own copy.
type Submission struct {
	// Name is the task's name.
	Name string
	// Payload is the value to store, not yet encoded.
	Payload any
	// Options are the submit's options, defaults not yet applied.
	Options SubmitOptions
	// InTx reports a SubmitTx: the row commits with the caller's
	// transaction, after the hooks returned.
	InTx bool
}

// SetMetadata sets one top-level key of the task's metadata object,
// keeping the others, without changing the value the caller passed as
// SubmitOptions.Metadata. The metadata must be a JSON object (or nil): any
// other value is an *ArgumentError.
func (s *Submission) SetMetadata(key string, value any) error {
	m, err := metadataObject(s.Options.Metadata)
	if err != nil {
		return err
	}
	m[key] = value
	s.Options.Metadata = m
	return nil
}

// metadataObject returns a fresh map holding md's top-level keys.
func metadataObject(md any) (map[string]any, error) {
	switch v := md.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return maps.Clone(v), nil
	}
	raw, err := jsonText(md)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, &ArgumentError{Op: "submit", Arg: "metadata", Reason: "must be a JSON object to add keys to"}
	}
	return m, nil
}

// jsonText is md as JSON text, read the way the store reads a value:
// []byte and json.RawMessage are JSON text already.
func jsonText(md any) ([]byte, error) {
	switch v := md.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	raw, err := json.Marshal(md)
	if err != nil {
		return nil, &ArgumentError{Op: "submit", Arg: "metadata", Reason: fmt.Sprintf("cannot be encoded: %v", err)}
	}
	return raw, nil
}

// SubmitHook wraps every submit of a Client (Submit, SubmitTx, Call,
// TaskDef.Submit, TaskContext.Submit, and each item of SubmitMany and
// SubmitManyTx, whose next returns once the whole batch is written): it
// may change the Submission (add metadata with SetMetadata, set a
// priority), refuse the submit by returning an error without calling next
// (nothing is written, and the caller gets the error as returned), and
// observe the stored task or the error next returns. Options.SubmitHooks lists them outermost first.
// A keyed submit that reuses a task returns that existing task, whose
// metadata is the first submit's.
type SubmitHook func(ctx context.Context, s *Submission, next func(ctx context.Context) (*Task, error)) (*Task, error)

// submitThrough runs the client's hooks around insert.
func (c *Client) submitThrough(ctx context.Context, s *Submission, insert func(ctx context.Context, s *Submission) (*Task, error)) (*Task, error) {
	if len(c.hooks) == 0 {
		return insert(ctx, s)
	}
	fn := func(ctx context.Context) (*Task, error) { return insert(ctx, s) }
	for i := len(c.hooks) - 1; i >= 0; i-- {
		hook, next := c.hooks[i], fn
		fn = func(ctx context.Context) (*Task, error) { return hook(ctx, s, next) }
	}
	return fn(ctx)
}

// EnvelopeOf is the error envelope a worker records when a handler (or
// the outermost Middleware) returns err, and whether the worker will try
// the task again if attempts remain: a *TaskError's own envelope, else
// type from err's Go type, code "handler_error", retryable. It is nil-safe:
// a nil err gives the zero envelope.
func EnvelopeOf(err error) ErrorEnvelope {
	if err == nil {
		return ErrorEnvelope{}
	}
	env, retryable := envelopeOf(err)
	env.Retryable = retryable
	return env
}
