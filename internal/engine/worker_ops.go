package engine

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// DefaultLease is the lease a claim or heartbeat takes unless told otherwise.
const DefaultLease = 30 * time.Second

// leaseExpiredError is the envelope lease recovery records on a task whose
// worker vanished on its last attempt.
var leaseExpiredError = mustEnvelopeJSON(cairnqtype.ErrorEnvelope{
	Type:    "LeaseExpired",
	Code:    "lease_expired",
	Message: "the worker's lease ran out on the task's last attempt",
})

func mustEnvelopeJSON(e cairnqtype.ErrorEnvelope) string {
	s, err := envelopeJSON(e)
	if err != nil {
		panic(err)
	}
	return s
}

// envelopeJSON encodes e with details defaulting to {} as every SDK writes it.
func envelopeJSON(e cairnqtype.ErrorEnvelope) (string, error) {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	return encodeJSON("error", e, "{}")
}

// storableEnvelope encodes env for the error column. An envelope that
// breaks the value limits is a failure record all the same, so instead of
// being refused it is cut down until it fits: details JSON cannot hold (or
// too large) are replaced by {"details_error": why}; NUL characters and
// invalid UTF-8 in the text fields become U+FFFD, and a message past
// MaxMessageBytes is cut there.
func storableEnvelope(env cairnqtype.ErrorEnvelope) (string, error) {
	text, err := envelopeJSON(env)
	if err == nil {
		return text, nil
	}
	if len(env.Details) > 0 {
		if _, derr := encodeJSON("error details", env.Details, "{}"); derr != nil {
			env.Details = map[string]any{"details_error": "the error's details were not stored: " + derr.Error()}
			if text, err = envelopeJSON(env); err == nil {
				return text, nil
			}
		}
	}
	env.Type = cleanText(env.Type, cairnqtype.MaxNameBytes)
	env.Code = cleanText(env.Code, cairnqtype.MaxNameBytes)
	env.Message = cleanText(env.Message, cairnqtype.MaxMessageBytes)
	if text, err = envelopeJSON(env); err == nil {
		return text, nil
	}
	env.Details = map[string]any{"details_error": "the error's details were not stored: " + err.Error()}
	return envelopeJSON(env)
}

// cleanText is s as a database stores it whatever it held: a NUL (which
// Postgres refuses in text and JSON) and invalid UTF-8 as U+FFFD, and at
// most max bytes, cut at a character's end.
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "")
	}
	return s
}

// drawFunc claims up to limit tasks named in names (nil: any of the
// session's names) inside an open claim session.
type drawFunc func(names []string, limit int) ([]*cairnqtype.Task, error)

func validateClaim(p cairnqtype.ClaimParams) error {
	if len(p.Queues) == 0 {
		return argError("claim", "queues", "must name at least one queue")
	}
	if err := ValidateName("claim", "worker id", p.WorkerID); err != nil {
		return err
	}
	for _, q := range p.Queues {
		if err := ValidateName("claim", "queue", q); err != nil {
			return err
		}
	}
	for _, n := range p.Names {
		if err := ValidateName("claim", "name", n); err != nil {
			return err
		}
	}
	if p.Lease < 0 {
		return argError("claim", "lease", "must be > 0, got %v", p.Lease)
	}
	if p.Limit < 0 {
		return argError("claim", "limit", "must be >= 0, got %d", p.Limit)
	}
	return nil
}

// Claim recovers expired leases, then leases up to Limit claimable tasks to
// WorkerID, in claim order (priority, then due time, then id). On Postgres
// it opens no transaction: recovery and the claim are one statement each,
// so a busy worker's claim is a single round trip.
func (s *Store) Claim(ctx context.Context, p cairnqtype.ClaimParams) ([]*cairnqtype.Task, error) {
	limit := max(p.Limit, 1)
	got, err := s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: limit,
		Draws: []Draw{{Names: p.Names, Batch: 1, Calls: limit, Tasks: -1}}})
	if err != nil || got.Tasks[0] == nil {
		return []*cairnqtype.Task{}, err
	}
	return got.Tasks[0], nil
}

// claimSession opens one claim transaction and lets plan draw from it any
// number of times, each draw with its own names and limit, after a single
// lease recovery (unless h.SkipRecover, or the probe saw no lease
// expired or did not look, or the pace left a busy worker's recovery
// out: res.LookDue). A read-only probe runs first
// (unless h.SkipProbe): when it finds nothing claimable and no expired
// lease, no transaction is opened, plan is not called, and Ran is false.
// plan runs while the write lock is held, so it must do nothing slow; on
// SQLite it may run more than once if the transaction is retried, so it
// must not keep state from a failed run. single says plan draws once
// (Claim), which on Postgres needs no shared transaction.
func (s *Store) claimSession(ctx context.Context, p cairnqtype.ClaimParams, h claimHints, single bool, plan func(draw drawFunc) error) (res sessionResult, err error) {
	if err := validateClaim(p); err != nil {
		return res, err
	}
	base := s.claimArgs(p)
	if p.Names != nil && len(p.Names) == 0 {
		// Nothing can be claimed; only lease recovery could be owed, and
		// every other poll of a worker with names does that.
		return res, s.SettleCompletions(ctx, h.Settle) // no claim ran, and no recovery
	}
	if !h.SkipProbe && len(h.Settle) == 0 { // one with settlements writes anyway
		work, expired, err := s.probeClaim(ctx, p, base, h.PaceLook, &res)
		if err != nil || !work {
			return res, err
		}
		h.SkipRecover = h.SkipRecover || !expired
	}
	if h.SkipProbe && !h.SkipRecover && s.dialect == protocol.Postgres {
		// A busy worker's recovery, paced with the probes' looks.
		var ok bool
		if ok, res.LookDue = s.leaseReads.take(time.Now()); !ok {
			h.SkipRecover = true
		}
	}
	settle := len(h.Settle) > 0
	var recovered []*cairnqtype.Task
	recoverLeases := func(q querier) (err error) {
		recovered = nil
		if !h.SkipRecover {
			recovered, err = s.recoverLeases(ctx, q, base)
		}
		return err
	}
	draws := func(q querier) error {
		res.Capped = false // a retried transaction draws anew
		drawPlain := func(names []string, limit int) ([]*cairnqtype.Task, error) {
			return s.drawPlain(ctx, q, p.Queues, names, limit, base)
		}
		return plan(func(names []string, limit int) ([]*cairnqtype.Task, error) {
			if names == nil {
				names = p.Names
			}
			if limit <= 0 || (names != nil && len(names) == 0) {
				return nil, nil
			}
			if len(names) == 1 {
				if l, ok := h.Limits[names[0]]; ok {
					tasks, capped, err := s.limitedDraw(ctx, q, names[0], l, limit, p.Queues, base, drawPlain)
					res.Capped = res.Capped || capped
					return tasks, err
				}
			}
			return drawPlain(names, limit)
		})
	}
	if len(h.Limits) > 0 {
		// A limited draw is several statements under the name's lock,
		// which only a transaction holds.
		single = false
	}
	switch {
	case s.dialect == protocol.Postgres && single && !settle:
		// Each statement on its own: Postgres makes one atomic by itself,
		// and recovery stands whether or not the draw after it succeeds. The
		// draw's snapshot is taken after recovery committed, so it sees the
		// recovered tasks as the shared transaction would.
		if err = s.be.writeSingle(ctx, recoverLeases); err == nil {
			err = s.be.writeSingle(ctx, draws)
		}
	case single && h.SkipRecover && !settle:
		// One statement (SQLite): it needs no savepoint of its own in
		// the writer's shared transaction.
		err = s.be.writeSingle(ctx, draws)
	default:
		err = s.be.write(ctx, func(q querier) error {
			if settle {
				// The settlements first, in the claim's transaction.
				if err := s.settleIn(ctx, q, h.Settle); err != nil {
					return err
				}
			}
			if err := recoverLeases(q); err != nil {
				return err
			}
			return draws(q)
		})
	}
	res.Ran = true
	if err != nil {
		return res, err
	}
	s.announce(h.Settle)
	for _, t := range recovered {
		s.settled(t)
		s.requeued(t)
		s.stepEnded(ctx, t)
	}
	return res, nil
}

// probeClaim reads whether p's queues hold a task to claim (work) and
// whether a lease has expired, before a claim: it spares an idle worker's
// poll its write. When it saw no expired lease, the claim skips lease
// recovery: in a fleet every idle process probes on every submit, and a
// recovery per process per submit grew with the fleet
// (docs/benchmarks.md, "Fleet"). A lease expiring between the probe and
// the claim is recovered by the next probe that looks. On Postgres with
// pace, the pace may leave that look out (res.LookDue says until when;
// claim_front.go says why), and expired is then false: the claim skips
// recovery as well.
func (s *Store) probeClaim(ctx context.Context, p cairnqtype.ClaimParams, base protocol.Args, pace bool, res *sessionResult) (work, expired bool, err error) {
	look, start := true, time.Now()
	if s.dialect == protocol.Postgres {
		if pace {
			look, res.LookDue = s.leaseReads.take(start)
		}
		base["look_for_expired"] = look // this session's map; other statements bind what they name
	}
	probe, pa := stmtClaimableProbe, base
	if windowed, priority, floor := s.frontPlan(p.Queues, p.Names); windowed {
		// As the draw's: a single queue and name as equalities, or the
		// floor bounds no index scan.
		probe, pa = stmtClaimableProbeWindow, withArgs(pa, floor.args(priority))
		pa["queues"] = protocol.One(p.Queues[0])
		if len(p.Names) == 1 {
			pa["names"] = protocol.One(p.Names[0])
		}
	}
	rows, err := s.readOne(ctx, probe, pa)
	if look && s.dialect == protocol.Postgres {
		s.leaseReads.ran(start, time.Since(start))
	}
	if err != nil || len(rows) == 0 {
		return false, false, err
	}
	if has, err := asBool("has_work", rows[0]["has_work"]); err != nil || !has {
		return false, false, err
	}
	expired, err = asBool("has_expired", rows[0]["has_expired"])
	return err == nil, expired, err
}

// claimArgs are the arguments every statement of p's claim session
// shares.
func (s *Store) claimArgs(p cairnqtype.ClaimParams) protocol.Args {
	lease := p.Lease
	if lease == 0 {
		lease = DefaultLease
	}
	return protocol.Args{
		"queues":              s.list(p.Queues),
		"names":               s.list(p.Names),
		"worker_id":           p.WorkerID,
		"lease_ms":            ms(lease),
		"lease_expired_error": leaseExpiredError,
	}
}

// drawPlain claims up to limit tasks of names (nil: any) from queues,
// from the queue's front where the claims found it (claim_front.go).
func (s *Store) drawPlain(ctx context.Context, q querier, queues, names []string, limit int, base protocol.Args) ([]*cairnqtype.Task, error) {
	a := withArgs(base, protocol.Args{"names": s.list(names), "limit": int64(limit)})
	// A single queue or name as an equality (protocol.One) is what
	// lets the draw seek cairnq_tasks_claim_idx or claim_name_idx.
	if len(queues) == 1 {
		a["queues"] = protocol.One(queues[0])
	}
	if len(names) == 1 {
		a["names"] = protocol.One(names[0])
	}
	stmt, key := stmtClaim, s.frontKey(queues, names)
	start := time.Now()
	windowed, priority, floor := s.fronts.plan(key, start)
	if windowed {
		stmt = stmtClaimWindow
		for k, v := range floor.args(priority) {
			a[k] = v // a is this draw's own copy
		}
	}
	rows, err := s.execRows(ctx, q, stmt, a)
	if err != nil {
		return nil, err
	}
	tasks, err := tasksOf(rows)
	if err == nil {
		s.fronts.observe(key, !windowed, start, time.Since(start), limit, tasks)
	}
	return tasks, err
}

// owned runs an ownership-checked worker write: no row back means the lease
// is gone.
func (s *Store) owned(ctx context.Context, name, id string, a protocol.Args) (*cairnqtype.Task, error) {
	rows, err := s.writeOne(ctx, name, a)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, &cairnqtype.LostLeaseError{ID: id}
	}
	return rowToTask(rows[0])
}

// Heartbeat extends the lease on a task workerID holds. The returned task
// shows whether a cancel was requested.
func (s *Store) Heartbeat(ctx context.Context, id, workerID string, lease time.Duration) (*cairnqtype.Task, error) {
	if lease <= 0 {
		lease = DefaultLease
	}
	return s.owned(ctx, stmtHeartbeat, id, protocol.Args{"id": id, "worker_id": workerID, "lease_ms": ms(lease)})
}

// HeartbeatBatch extends the leases workerID still holds among ids, in one
// statement, and returns for each of them whether a cancel was requested.
// An id absent from the result lost its lease; the others are unaffected.
func (s *Store) HeartbeatBatch(ctx context.Context, ids []string, workerID string, lease time.Duration) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	rows, err := s.writeOne(ctx, stmtHeartbeatBatch, protocol.Args{
		"ids": s.list(ids), "worker_id": workerID, "lease_ms": ms(lease),
	})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return nil, err
		}
		out[id] = r["cancel_requested_at_ms"] != nil
	}
	return out, nil
}

// Progress records how far a running attempt got. A nil progress or message
// keeps the stored one: neither can be cleared once set.
func (s *Store) Progress(ctx context.Context, id, workerID string, progress *float64, message *string) (*cairnqtype.Task, error) {
	if progress != nil && (math.IsNaN(*progress) || math.IsInf(*progress, 0)) {
		return nil, argError("progress", "fraction", "must be a finite number, got %v", *progress)
	}
	if message != nil {
		if err := checkText("progress", "message", *message, cairnqtype.MaxMessageBytes); err != nil {
			return nil, err
		}
	}
	a := protocol.Args{"id": id, "worker_id": workerID, "progress": nil, "message": nil}
	if progress != nil {
		a["progress"] = *progress
	}
	if message != nil {
		a["message"] = *message
	}
	return s.owned(ctx, stmtProgress, id, a)
}

// EncodeResult encodes a handler's result; nil stores SQL NULL.
func EncodeResult(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if r, ok := v.(json.RawMessage); ok && r == nil {
		return nil, nil
	}
	return encodeJSON("result", v, "null")
}

// Succeed marks a running task succeeded with result, whatever cancel was
// requested. Workers settle with Complete instead.
func (s *Store) Succeed(ctx context.Context, id, workerID string, result any) (*cairnqtype.Task, error) {
	res, err := EncodeResult(result)
	if err != nil {
		return nil, err
	}
	t, err := s.owned(ctx, stmtSucceed, id, protocol.Args{
		"id": id, "worker_id": workerID, "result": res, "message": nil,
	})
	s.settled(t)
	return t, err
}

// Complete settles a finished attempt: canceled if a cancel was requested
// while it ran (the result is discarded: cancel wins), else succeeded. It
// returns the status the task took, not the whole row: this is every
// task's settlement, and the worker needs nothing more (Get reads the row).
func (s *Store) Complete(ctx context.Context, id, workerID string, result any) (cairnqtype.TaskRef, error) {
	res, err := EncodeResult(result)
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	return s.complete(ctx, id, workerID, res)
}

func (s *Store) complete(ctx context.Context, id, workerID string, res any) (ref cairnqtype.TaskRef, err error) {
	if be, ok := s.be.(*pgBackend); ok {
		ref, err = be.completeGrouped(ctx, id, workerID, res)
	} else if be, ok := s.be.(*sqliteBackend); ok {
		ref, err = s.completeSQLite(ctx, be, id, workerID, res)
	} else {
		var t *cairnqtype.Task
		if t, err = s.owned(ctx, stmtComplete, id, protocol.Args{"id": id, "worker_id": workerID, "result": res}); t != nil {
			ref = cairnqtype.TaskRef{ID: t.ID, Status: t.Status}
		}
	}
	if err == nil {
		s.settledRef(ref)
	}
	return ref, err
}

// Fail records a failed attempt: canceled if a cancel was requested, queued
// again after delay if retryable and attempts remain, else failed for good.
// The envelope is stored on every branch, and a failure record never
// strands the task: an envelope past the value limits is stored in a form
// that fits (see storableEnvelope), saying what was changed.
func (s *Store) Fail(ctx context.Context, id, workerID string, env cairnqtype.ErrorEnvelope, retryable bool, delay time.Duration) (*cairnqtype.Task, error) {
	return s.fail(ctx, stmtFail, id, workerID, env, retryable, delay)
}

// FailRecorded is Fail for a Go worker's settlement: the attempt's error
// is also appended to metadata's cairnq_errors member (AttemptErrors).
func (s *Store) FailRecorded(ctx context.Context, id, workerID string, env cairnqtype.ErrorEnvelope, retryable bool, delay time.Duration) (*cairnqtype.Task, error) {
	return s.fail(ctx, stmtFailRecorded, id, workerID, env, retryable, delay)
}

// fail runs stmt, fail or fail_recorded, for Fail and FailRecorded.
func (s *Store) fail(ctx context.Context, stmt, id, workerID string, env cairnqtype.ErrorEnvelope, retryable bool, delay time.Duration) (*cairnqtype.Task, error) {
	if delay < 0 {
		delay = 0
	}
	text, err := storableEnvelope(env)
	if err != nil {
		return nil, err
	}
	a := protocol.Args{"id": id, "worker_id": workerID, "error": text, "retryable": retryable, "delay_ms": ms(delay)}
	if stmt == stmtFailRecorded {
		a["entry"] = attemptEntry(env)
	}
	t, err := s.owned(ctx, stmt, id, a)
	s.settled(t)
	s.requeued(t)
	return t, err
}

// frontKey is claimFronts' key for a draw, "" where the store draws from
// no front (SQLite, whose deleted index entries go at once).
func (s *Store) frontKey(queues, names []string) string {
	if s.dialect != protocol.Postgres {
		return ""
	}
	return frontKey(queues, names)
}

// frontPlan is claimFronts.plan for a draw of queues and names now.
func (s *Store) frontPlan(queues, names []string) (windowed bool, priority int, floor frontFloor) {
	return s.fronts.plan(s.frontKey(queues, names), time.Now())
}

// withArgs is a copy of base with extra's arguments set over it.
func withArgs(base, extra protocol.Args) protocol.Args {
	a := make(protocol.Args, len(base)+len(extra))
	for k, v := range base {
		a[k] = v
	}
	for k, v := range extra {
		a[k] = v
	}
	return a
}
