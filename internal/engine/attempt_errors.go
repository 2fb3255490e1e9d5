package engine

import (
	"encoding/json"
	"math"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Every failed attempt a Go worker settles is also kept in the task's
// metadata, in the member AttemptErrorsMember, an array of the newest
// MaxAttemptErrors entries, oldest first,
//
//	{"cairnq_errors": [{"type":"Error","code":"handler_error","message":"smtp refused",
//	                    "attempt":1,"at_ms":1767312000000}, ...]}
//
// written in the statement that records the failure (fail_recorded), so
// that the error column's last error does not hide the ones before it.
// A message longer than AttemptMessageBytes is cut there, and ends with
// "…"; details are not kept
// (the error column holds the last attempt's in full). A failure other
// writers record (another SDK's worker, lease recovery) adds no entry.

// AttemptErrorsMember is the metadata member of a task's attempts' errors.
const AttemptErrorsMember = "cairnq_errors"

// MaxAttemptErrors is how many attempts' errors a task keeps, the newest.
const MaxAttemptErrors = 10

// AttemptMessageBytes bounds an attempt's kept message.
const AttemptMessageBytes = 1000

// AttemptError is one failed attempt as its task's metadata keeps it.
type AttemptError struct {
	Attempt int
	At      time.Time
	Type    string
	Code    string
	Message string
}

// attemptEntry is env as fail_recorded appends it, without the attempt
// and the time, which the statement adds.
// Its texts are cleaned as the error column's are when they would not
// store (cleanText): a NUL would fail the whole failure's write on
// Postgres.
func attemptEntry(env cairnqtype.ErrorEnvelope) string {
	full := cleanText(env.Message, math.MaxInt)
	msg := cleanText(full, AttemptMessageBytes)
	if len(msg) < len(full) {
		msg += "…"
	}
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}{cleanText(env.Type, cairnqtype.MaxNameBytes), cleanText(env.Code, cairnqtype.MaxNameBytes), msg})
	return string(b)
}

// AttemptErrors reads the attempts' errors from a task's metadata,
// oldest first; none when the member is absent or does not read.
func AttemptErrors(md json.RawMessage) []AttemptError {
	var m struct {
		Errors []struct {
			Attempt int    `json:"attempt"`
			AtMS    int64  `json:"at_ms"`
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"cairnq_errors"`
	}
	if json.Unmarshal(md, &m) != nil {
		return nil
	}
	out := make([]AttemptError, 0, len(m.Errors))
	for _, e := range m.Errors {
		out = append(out, AttemptError{Attempt: e.Attempt, At: msTime(e.AtMS, e.AtMS != 0), Type: e.Type, Code: e.Code, Message: e.Message})
	}
	return out
}
