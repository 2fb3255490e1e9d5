// Package cronspec computes the slots of a periodic entry: when each run of
// a cron spec falls due, and which due slots a scheduler should submit.
// It holds no state and reads no clock, so every decision can be tested
// with made-up times; the root package's Scheduler supplies the clock and
// the database.
//
// Cron fields and descriptors are parsed by github.com/robfig/cron/v3.
// Two parts are done here instead, because every process (and every SDK)
// must compute the same slots: "@every" is aligned on the Unix epoch
// (robfig's is relative to whenever it is asked, which differs per
// process), and a spec without a zone is in UTC (robfig's default is the
// host's local zone, which differs per host).
package cronspec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule computes an entry's slots.
type Schedule interface {
	// Next returns the first slot strictly after t, or the zero time when
	// there is none within MaxSearch.
	Next(t time.Time) time.Time
}

// MaxSearch is how far ahead Next looks for a slot and how far back Last
// looks for one (robfig/cron gives up after five years as well).
const MaxSearch = 5 * 366 * 24 * time.Hour

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses spec: five cron fields (minute hour day-of-month month
// day-of-week), six with a leading seconds field, a descriptor (@yearly,
// @annually, @monthly, @weekly, @daily, @midnight, @hourly) or "@every D"
// with D a Go duration of whole seconds, at least one. A leading "TZ=Zone "
// or "CRON_TZ=Zone " names the zone the fields are read in; loc does the
// same (nil: UTC), and giving both is an error. now is only used to
// refuse a spec that never fires (such as February 30th).
func Parse(spec string, loc *time.Location, now time.Time) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("empty spec")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		zone, rest, ok := strings.Cut(spec, " ")
		_, name, _ := strings.Cut(zone, "=")
		if !ok || strings.TrimSpace(rest) == "" {
			return nil, fmt.Errorf("%q: no schedule after the zone", spec)
		}
		if loc != nil {
			return nil, fmt.Errorf("%q: the zone is given twice, in the spec and as a location", spec)
		}
		l, err := time.LoadLocation(name)
		if err != nil || name == "" || name == "Local" {
			return nil, fmt.Errorf("%q: unknown time zone %q", spec, name)
		}
		loc, spec = l, strings.TrimSpace(rest)
	}
	if loc == nil {
		loc = time.UTC
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		return parseEvery(strings.TrimSpace(rest))
	}
	s, err := parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", spec, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok { // only @every yields another type, and it is handled above
		return nil, fmt.Errorf("%q: unsupported schedule", spec)
	}
	ss.Location = loc
	sched := specSchedule{ss}
	if sched.Next(now).IsZero() {
		return nil, fmt.Errorf("%q: never fires", spec)
	}
	return sched, nil
}

// parse is robfig's parser behind a recover: a parser that panics on some
// input must not take the application down at Add.
func parse(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("unparsable (%v)", r)
		}
	}()
	return parser.Parse(spec)
}

func parseEvery(d string) (Schedule, error) {
	if d == "" {
		return nil, errors.New("@every needs a duration, such as @every 30s")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		return nil, fmt.Errorf("@every %s: %w", d, err)
	}
	if dur < time.Second || dur%time.Second != 0 {
		return nil, fmt.Errorf("@every %s: must be whole seconds, at least 1s", d)
	}
	return Every(dur), nil
}

// specSchedule is a parsed cron spec.
type specSchedule struct{ s *cron.SpecSchedule }

func (s specSchedule) Next(t time.Time) time.Time {
	// In the entry's zone: robfig reads time.Local as "t's zone".
	n := s.s.Next(t.In(s.s.Location))
	if n.IsZero() {
		return n
	}
	return n.In(time.UTC)
}

// Every is the schedule "@every d": the instants that are whole multiples
// of d since the Unix epoch, whatever the zone.
type Every time.Duration

// Next returns the first multiple of d after t.
func (e Every) Next(t time.Time) time.Time {
	d := time.Duration(e).Milliseconds()
	return time.UnixMilli((floorDiv(t.UnixMilli(), d) + 1) * d).UTC()
}

// last returns the newest multiple of d at or before t.
func (e Every) last(t time.Time) time.Time {
	d := time.Duration(e).Milliseconds()
	return time.UnixMilli(floorDiv(t.UnixMilli(), d) * d).UTC()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Last returns up to k slots of s that are at or before now and after
// floor, newest first. A zero floor means no floor; slots more than
// MaxSearch before now are not looked for.
func Last(s Schedule, now, floor time.Time, k int) []time.Time {
	if k <= 0 {
		return nil
	}
	horizon := now.Add(-MaxSearch)
	if floor.IsZero() || floor.Before(horizon) {
		floor = horizon
	}
	if e, ok := s.(Every); ok {
		var out []time.Time
		for t := e.last(now); t.After(floor) && len(out) < k; t = t.Add(-time.Duration(e)) {
			out = append(out, t)
		}
		return out
	}
	// Only Next is known, so search windows reaching back twice as far
	// each time until one holds k slots or reaches the floor.
	for w := time.Second; ; w *= 2 {
		start := now.Add(-w)
		final := !start.After(floor)
		if final {
			start = floor
		}
		var got []time.Time // oldest first; trimmed to the newest k as it grows
		for t := s.Next(start); !t.IsZero() && !t.After(now); t = s.Next(t) {
			got = append(got, t)
			if len(got) >= 2*k+64 {
				got = append(got[:0], got[len(got)-k:]...)
			}
		}
		if len(got) >= k || final {
			if len(got) > k {
				got = got[len(got)-k:]
			}
			out := make([]time.Time, len(got))
			for i, t := range got {
				out[len(got)-1-i] = t
			}
			return out
		}
	}
}

// Policy is what an entry does with slots that fell due while no scheduler
// could submit them.
type Policy struct {
	// CatchUp is how many missed slots are submitted late, the newest
	// first: 0 skips them, 1 runs the entry once for all of them.
	CatchUp int
	// Grace is how late a slot may be and still be submitted as on time,
	// whatever CatchUp says: every such slot after the cursor, or only the
	// newest due slot for a scheduler starting without a cursor (the
	// others fell due while it was down).
	Grace time.Duration
	// Lookback bounds how many slots a scheduler starting without a
	// cursor reads back looking for the newest slot the database holds.
	Lookback int
}

// Decision is what one evaluation of an entry concluded.
type Decision struct {
	// Submit holds the slots to submit, oldest first.
	Submit []time.Time
	// Cursor is the newest slot the evaluation considered: the next
	// evaluation looks only after it. Unchanged when nothing new was due.
	Cursor time.Time
	// Late counts the slots of Submit that were missed (caught up).
	Late int
	// Missed counts the missed slots this evaluation looked at and did
	// not submit (with CatchUp 0 none are looked at).
	Missed int
	// NoHistory is set when a scheduler starting without a cursor found
	// no earlier slot in the database, so that nothing counted as missed.
	NoHistory bool
}

// Decide evaluates an entry at now. cursor is the newest slot this
// scheduler already decided on (zero when it just started); present reports
// whether the database holds a task for a slot.
//
// On-time slots are submitted whatever the policy: every slot after the
// cursor at most Grace late, or, without a cursor, the newest due slot if
// it is at most Grace late. Older due slots are missed slots: walking back
// from the newest of them, every slot the database lacks up to the first
// one it holds is missed, and the newest CatchUp of them are submitted. A
// scheduler that has just started counts slots as missed only if it finds
// a slot the database holds within Lookback slots (a new entry, or one
// whose tasks were all purged, has missed nothing); a running one has its
// cursor as that evidence.
func Decide(ctx context.Context, s Schedule, cursor, now time.Time, p Policy, present func(context.Context, time.Time) (bool, error)) (Decision, error) {
	d := Decision{Cursor: cursor}
	newest := Last(s, now, cursor, 1)
	if len(newest) == 0 {
		return d, nil // nothing new is due
	}
	d.Cursor = newest[0]
	fail := func(err error) (Decision, error) { return Decision{Cursor: cursor}, err }

	// The on-time slots, newest first.
	onTime := newest
	if now.Sub(newest[0]) > p.Grace {
		onTime = nil
	} else if !cursor.IsZero() {
		floor := now.Add(-p.Grace - time.Nanosecond) // slots at most Grace late
		if floor.Before(cursor) {
			floor = cursor
		}
		onTime = Last(s, now, floor, max(p.Lookback, 1))
	}
	var submit []time.Time
	for _, t := range onTime {
		ok, err := present(ctx, t)
		if err != nil {
			return fail(err)
		}
		if !ok {
			submit = append(submit, t)
		}
	}
	if p.CatchUp > 0 {
		// The missed slots: due, older than the on-time ones, after the cursor.
		end := now
		if len(onTime) > 0 {
			end = onTime[len(onTime)-1].Add(-time.Nanosecond)
		}
		k := p.CatchUp + 1
		if cursor.IsZero() {
			k = max(p.Lookback, k)
		}
		var late []time.Time
		evidence := !cursor.IsZero()
		for _, t := range Last(s, end, cursor, k) {
			ok, err := present(ctx, t)
			if err != nil {
				return fail(err)
			}
			if ok {
				evidence = true
				break
			}
			d.Missed++
			if len(late) < p.CatchUp {
				late = append(late, t)
			}
		}
		if !evidence {
			late, d.Missed, d.NoHistory = nil, 0, true
		}
		d.Late = len(late)
		d.Missed -= len(late)
		submit = append(submit, late...)
	}
	// Oldest first.
	for i, j := 0, len(submit)-1; i < j; i, j = i+1, j-1 {
		submit[i], submit[j] = submit[j], submit[i]
	}
	d.Submit = submit
	return d, nil
}
