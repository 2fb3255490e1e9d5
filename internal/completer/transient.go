package completer

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/outage"
)

// Transient reports whether a failed write may succeed if run again: not
// a refusal that would repeat (bad input, a lost lease, a closed or
// replaced store, the server rejecting the statement itself), but a busy
// database, the database out of reach (outage.Is, which every
// ErrUnavailable is), a write that lost a race its next run settles
// (engine.Conflicted), or an error that carries no SQLSTATE or one of the
// classes of transaction rollback, resource, operator and system faults.
// The worker's heartbeat retries its renewals by the same test.
func Transient(err error) bool {
	switch {
	case err == nil, errors.Is(err, cairnqtype.ErrLostLease), errors.Is(err, cairnqtype.ErrInvalidArgument), engine.Gone(err),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, cairnqtype.ErrBusy), outage.Is(err), engine.Conflicted(err):
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		code := se.SQLState()
		switch code[:min(2, len(code))] {
		case "40", "53", "57", "58":
			return true
		}
		return false
	}
	return true
}
