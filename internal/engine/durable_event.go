package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// Events (issue 48) are delivered into the events object of a task's
// cairnq_durable member, once per name: the first delivery of a name
// stays, whoever sends it, so a wait that read it reads the same on every
// later attempt. A wait that runs out delivers a mark in the event's
// place (DurableEvent.TimedOut), so an event sent after the timeout is
// refused rather than seen by one attempt and not another.

// EventRefusedError reports an event that was not delivered: its task
// ended (Status), an event of that name is there already (Existing:
// delivered before, or the mark of a wait that timed out), or it came
// after the end of the task's wait for it (WaitEnded).
type EventRefusedError struct {
	TaskID    string
	Event     string
	Status    cairnqtype.Status
	Existing  *DurableEvent
	WaitEnded bool
}

func (e *EventRefusedError) Error() string {
	switch {
	case e.WaitEnded || e.Existing != nil && e.Existing.TimedOut:
		return fmt.Sprintf("cairnq: task %s: event %q refused: its wait timed out", e.TaskID, e.Event)
	case e.Existing != nil:
		return fmt.Sprintf("cairnq: task %s: event %q refused: it was delivered already (an event counts once)", e.TaskID, e.Event)
	}
	return fmt.Sprintf("cairnq: task %s: event %q refused: the task has ended (%s)", e.TaskID, e.Event, e.Status)
}

// EventArrivedError is what Settle returns for a durable wait's snooze
// (Settlement.Event) when the event it waits for is there: nothing was
// written, and the attempt, still holding the task, goes on with Event.
type EventArrivedError struct {
	TaskID string
	Name   string
	Event  DurableEvent
}

func (e *EventArrivedError) Error() string {
	return fmt.Sprintf("cairnq: task %s: event %q arrived before its wait parked", e.TaskID, e.Name)
}

// ValidateEvent checks an event's name: not empty, within MaxNameBytes,
// and without a double quote, a backslash or a control character (SQLite
// statements quote it into a JSON path).
func ValidateEvent(op, name string) error {
	if err := ValidateName(op, "event", name); err != nil {
		return err
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return r == '"' || r == '\\' || unicode.IsControl(r) }); i >= 0 {
		return argError(op, "event", "holds %q at byte %d: an event's name may not hold a double quote, a backslash or a control character", name[i], i)
	}
	return nil
}

// SendEvent delivers payload (JSON, encoded as a task's payload is) as
// the event named name to task id, unless the task ended or already has
// an event of that name (*EventRefusedError); a task that waits for it is
// made due at once. A task gone is ErrNotFound, metadata the member
// cannot be kept in a *DurableFormatError; nothing is written then.
func (s *Store) SendEvent(ctx context.Context, id, name string, payload any) error {
	ev, err := s.eventOf(payload)
	if err != nil {
		return err
	}
	return s.sendEvent(ctx, nil, id, "", name, ev)
}

// SendEventByKey is SendEvent to the task the key names.
func (s *Store) SendEventByKey(ctx context.Context, key, name string, payload any) error {
	ev, err := s.eventOf(payload)
	if err != nil {
		return err
	}
	return s.sendEvent(ctx, nil, "", key, name, ev)
}

// SendEventTx is SendEvent (to id, or to key's task when id is "") inside
// a transaction the application holds: the event is delivered, and its
// task woken, only if the application commits. Postgres only.
func (s *Store) SendEventTx(ctx context.Context, sess executor.Session, id, key, name string, payload any) error {
	if err := s.needsPostgres(ctx, "SendEventTx", sess); err != nil {
		return err
	}
	ev, err := s.eventOf(payload)
	if err != nil {
		return err
	}
	return s.sendEvent(ctx, pgQuerier{sess}, id, key, name, ev)
}

// TimeOutWait ends task id's wait for the event name as timed out: a
// mark takes the event's place, unless the event (or a mark) is there
// already. It returns what holds the place now, the mark or the event.
func (s *Store) TimeOutWait(ctx context.Context, id, name string) (DurableEvent, error) {
	mark := DurableEvent{AtMs: s.now().UnixMilli(), TimedOut: true}
	err := s.sendEvent(ctx, nil, id, "", name, mark)
	var refused *EventRefusedError
	if errors.As(err, &refused) && refused.Existing != nil {
		return *refused.Existing, nil
	}
	return mark, err
}

// eventOf is the record of an event carrying payload, arriving now.
func (s *Store) eventOf(payload any) (DurableEvent, error) {
	raw, err := encodeJSON("payload", payload, "null")
	if err != nil {
		return DurableEvent{}, err
	}
	return DurableEvent{Payload: json.RawMessage(raw), AtMs: s.now().UnixMilli()}, nil
}

// sendEvent runs the delivery in q, or in a write of its own when q is
// nil, to id or, when id is "", to key's task.
func (s *Store) sendEvent(ctx context.Context, q querier, id, key, name string, ev DurableEvent) error {
	if err := ValidateEvent("send event", name); err != nil {
		return err
	}
	if id == "" {
		if err := checkKey("send event", key); err != nil {
			return err
		}
	} else if err := checkID("send event", id); err != nil {
		return err
	}
	entry, err := encodeJSON("payload", ev, "null")
	if err != nil {
		return err
	}
	var queue string
	send := func(q querier) error {
		queue = ""
		target := id
		if target == "" {
			rows, err := s.exec(ctx, q, stmtGetStatusByKey, protocol.Args{"key": key})
			ref, err := foundRef(rows, err)
			if err != nil {
				return err
			}
			target = ref.ID
		}
		rows, err := s.exec(ctx, q, stmtDurableEvent, protocol.Args{"id": target, "event": name, "entry": entry,
			"max_bytes": int64(cairnqtype.MaxValueBytes)})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return s.undelivered(ctx, q, target, name, ev, entry)
		}
		if woke, err := asBool("woke", rows[0]["woke"]); err != nil || !woke {
			return err
		}
		queue, _, err = asString("queue", rows[0]["queue"])
		return err
	}
	switch {
	case q != nil:
		// In the application's transaction: the statement's notify is
		// heard when it commits, here as elsewhere.
		return send(q)
	case key != "":
		err = s.be.write(ctx, send) // the key's task and the event in one transaction
	default:
		err = s.be.writeSingle(ctx, send)
	}
	if err == nil && queue != "" {
		s.hub.Queued(queue) // this process's idle workers; others hear the commit
	}
	return err
}

// undelivered tells why ev, the event name, was not delivered to task
// id, reading its row in q.
func (s *Store) undelivered(ctx context.Context, q querier, id, name string, ev DurableEvent, entry string) error {
	rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": id})
	t, err := found(rows, err)
	if err != nil {
		return err
	}
	if t.IsTerminal() {
		return &EventRefusedError{TaskID: id, Event: name, Status: t.Status}
	}
	d, err := ReadDurable(t)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(strings.TrimLeft(string(t.Metadata), " \t\r\n"), "{") {
		return &DurableFormatError{TaskID: id, Reason: "its metadata is not a JSON object"}
	}
	if had, ok := d.Events[name]; ok {
		return &EventRefusedError{TaskID: id, Event: name, Status: t.Status, Existing: &had}
	}
	for _, st := range d.Steps {
		if st.Kind == StepWait && st.Name == name && st.UntilMs < ev.AtMs {
			return &EventRefusedError{TaskID: id, Event: name, Status: t.Status, WaitEnded: true}
		}
	}
	if size := len(t.Metadata) + len(name) + len(entry); size > cairnqtype.MaxValueBytes {
		return &cairnqtype.SerializationError{Field: "payload", Err: fmt.Errorf(
			"%w: event %q would make task %s's metadata %d bytes, past MaxValueBytes", cairnqtype.ErrValueTooLarge, name, id, size)}
	}
	return fmt.Errorf("cairnq: task %s: event %q was not delivered, and its row shows no reason", id, name)
}

// waitEnded turns the lost lease a durable wait's snooze (st.Event)
// reported into an *EventArrivedError when the attempt still holds the
// task and the event is there: the snooze refused to park it.
func (s *Store) waitEnded(ctx context.Context, st Settlement, err error) error {
	if st.Event == "" || !errors.Is(err, cairnqtype.ErrLostLease) {
		return err
	}
	t, gerr := s.Get(ctx, st.Task.ID)
	if gerr != nil || t.Status != cairnqtype.StatusRunning || t.WorkerID != st.WorkerID || t.Attempt != st.Task.Attempt {
		return err
	}
	d, derr := ReadDurable(t)
	if ev, ok := d.Events[st.Event]; derr == nil && ok {
		return &EventArrivedError{TaskID: t.ID, Name: st.Event, Event: ev}
	}
	return err
}
