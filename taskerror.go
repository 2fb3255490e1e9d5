package cairnq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"
)

// TaskError is an error a handler returns (or passes to TaskContext.Fail)
// to choose how its failure is recorded: the envelope's type, code,
// message and details, and whether the task may be tried again.
type TaskError struct {
	Type      string // default "TaskError"
	Code      string // default "task_error"
	Message   string
	Retryable bool // false: the task fails for good, whatever attempts remain
	Details   map[string]any
	Err       error // optional cause, kept for errors.Is/As in the process
}

// Error returns the message, or the cause's when there is no message. A
// nil *TaskError (a handler returning a typed nil) reads as a generic one.
func (e *TaskError) Error() string {
	if e == nil {
		return "task error"
	}
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *TaskError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Envelope returns the error record the protocol stores.
func (e *TaskError) Envelope() ErrorEnvelope {
	if e == nil {
		e = &TaskError{}
	}
	env := ErrorEnvelope{Type: e.Type, Code: e.Code, Message: e.Error(), Retryable: e.Retryable, Details: e.Details}
	if env.Type == "" {
		env.Type = "TaskError"
	}
	if env.Code == "" {
		env.Code = "task_error"
	}
	if env.Details == nil {
		env.Details = map[string]any{}
	}
	return env
}

// Permanent wraps err as a non-retryable failure: the task fails for good
// on this attempt.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &TaskError{Message: err.Error(), Err: err, Type: errorType(err), Code: "handler_error"}
}

// envelopeOf turns a handler's error into the stored envelope and whether
// to retry. A *TaskError anywhere in the chain decides for itself; any
// other error is retryable.
//
// The error is the handler's own value: its Error, Is, As or Unwrap
// methods may panic (a typed nil is the common case), and they run here,
// outside the handler's recover, so a panic among them is recovered and
// recorded as the failure instead of taking the worker down.
func envelopeOf(err error) (env ErrorEnvelope, retryable bool) {
	defer func() {
		if p := recover(); p != nil {
			env = ErrorEnvelope{
				Type: "Panic", Code: "handler_panic", Retryable: true, Details: map[string]any{},
				Message: fmt.Sprintf("the error the handler returned (%T) panicked when read: %v", err, p),
			}
			retryable = true
		}
	}()
	var te *TaskError
	if errors.As(err, &te) {
		if te == nil { // a typed nil: a TaskError with nothing set
			te = &TaskError{}
		}
		env := te.Envelope()
		if te.Message == "" && err.Error() != env.Message {
			env.Message = err.Error()
		}
		return env, te.Retryable
	}
	return ErrorEnvelope{Type: errorType(err), Code: "handler_error", Message: err.Error(), Retryable: true, Details: map[string]any{}}, true
}

// errorType names an error's Go type without package or pointer, the way
// the other SDKs record their exception class names. The anonymous errors
// of errors.New and fmt.Errorf read as "Error".
func errorType(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch name := t.Name(); name {
	case "", "errorString", "wrapError", "wrapErrors", "joinError":
		return "Error"
	default:
		return name
	}
}

// panicEnvelope records a recovered handler panic.
func panicEnvelope(p any, stack string) ErrorEnvelope {
	return ErrorEnvelope{
		Type: "Panic", Code: "handler_panic", Message: fmt.Sprint(p), Retryable: true,
		Details: map[string]any{"stack": stack},
	}
}

// NoRetryBackoff, as WorkerOptions.RetryBackoff, requeues failed attempts
// with no delay.
const NoRetryBackoff time.Duration = -1

// Retry backoff defaults: the window doubles from 1s per attempt up to 30s.
const (
	DefaultRetryBackoff    = time.Second
	DefaultRetryBackoffMax = 30 * time.Second
)

// retryDelay is equal-jitter exponential backoff: the window is
// min(max, base * 2^(attempt-1)) and the delay is uniform in its upper
// half, so a fleet at the cap does not retry in lockstep, and jitter never
// shortens a retry below half the plain backoff.
func retryDelay(attempt int, base, maxDelay time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	window := base
	for i := 1; i < attempt && window < maxDelay; i++ {
		window *= 2
	}
	window = min(window, maxDelay)
	half := window / 2
	if window-half <= 0 {
		return window
	}
	return half + rand.N(window-half)
}
