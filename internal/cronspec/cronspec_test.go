package cronspec

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var ref = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func mustParse(t *testing.T, spec string, loc *time.Location) Schedule {
	t.Helper()
	s, err := Parse(spec, loc, ref)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return s
}

func TestParseAcceptsTheDocumentedForms(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no zoneinfo:", err)
	}
	for _, c := range []struct {
		spec string
		loc  *time.Location
		next string // the first slot after ref, RFC 3339 in UTC
	}{
		{"*/5 * * * *", nil, "2026-03-14T15:10:00Z"},
		{"  0   9 * * *  ", nil, "2026-03-15T09:00:00Z"},
		{"30 * * * * *", nil, "2026-03-14T15:09:30Z"},
		{"* * * * * *", nil, "2026-03-14T15:09:27Z"},
		{"@hourly", nil, "2026-03-14T16:00:00Z"},
		{"@daily", nil, "2026-03-15T00:00:00Z"},
		{"@midnight", nil, "2026-03-15T00:00:00Z"},
		{"@weekly", nil, "2026-03-15T00:00:00Z"}, // a Sunday
		{"@monthly", nil, "2026-04-01T00:00:00Z"},
		{"@yearly", nil, "2027-01-01T00:00:00Z"},
		{"@annually", nil, "2027-01-01T00:00:00Z"},
		{"@every 30s", nil, "2026-03-14T15:09:30Z"},
		{"@every 1h", tokyo, "2026-03-14T16:00:00Z"}, // epoch-aligned whatever the zone
		{"@every 7m", nil, time.UnixMilli((ref.UnixMilli()/420000 + 1) * 420000).UTC().Format(time.RFC3339)},
		{"0 9 * * *", tokyo, "2026-03-15T00:00:00Z"},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", nil, "2026-03-15T00:00:00Z"},
		{"TZ=Asia/Tokyo 0 9 * * *", nil, "2026-03-15T00:00:00Z"},
		{"0 0 29 2 *", nil, "2028-02-29T00:00:00Z"},
	} {
		got := mustParse(t, c.spec, c.loc).Next(ref).Format(time.RFC3339)
		if got != c.next {
			t.Errorf("Parse(%q, %v).Next(ref) = %s, want %s", c.spec, c.loc, got, c.next)
		}
	}
}

func TestParseRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{
		"", "   ", "* * * *", "* * * * * * *", "61 * * * *", "* 24 * * *", "*/0 * * * *",
		"a b c d e", "@bogus", "@every", "@every 500ms", "@every 1.5s", "@every -1s", "@every 0s",
		"@every soon", "@everyday", "TZ=Nowhere/Nothing * * * * *", "TZ=UTC", "TZ=", "CRON_TZ= * * * * *",
		"TZ=Local * * * * *", "0 0 30 2 *", "0 0 31 4 *", "5-1 * * * *",
	} {
		if s, err := Parse(spec, nil, ref); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", spec, s)
		}
	}
	if _, err := Parse("TZ=UTC * * * * *", time.UTC, ref); err == nil {
		t.Error("a zone in the spec and a location: want an error")
	}
}

// Nothing a user types may panic the parser (robfig/cron has inputs that
// do; Parse turns them into errors).
func TestParseNeverPanics(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	atoms := []string{"*", "/", "-", ",", "0", "1", "59", "60", "99999999999999999999", "?", "L", "W", "#", " ", "@", "every", "TZ=", "CRON_TZ=", "UTC", "JAN", "MON", "\x00", "é"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(14) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Parse(%q) panicked: %v", b.String(), p)
				}
			}()
			Parse(b.String(), nil, ref)
		}()
	}
}

// Last agrees with walking Next forward, for every kind of schedule.
func TestLastAgreesWithNext(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		spec   string
		window time.Duration // holds more than 100 slots (or reaches MaxSearch)
	}{
		{"* * * * * *", time.Hour}, {"*/7 * * * * *", time.Hour}, {"*/5 * * * *", day},
		{"@hourly", 10 * day}, {"@every 30s", day}, {"@every 7m", day},
		{"0 0 29 2 *", MaxSearch}, {"15 10 * * 1-5", 300 * day},
	} {
		spec := c.spec
		s := mustParse(t, spec, nil)
		for _, k := range []int{1, 2, 5, 100} {
			for _, floorBack := range []time.Duration{0, 10 * time.Second, 3 * time.Hour} {
				var floor time.Time
				if floorBack > 0 {
					floor = ref.Add(-floorBack)
				}
				got := Last(s, ref, floor, k)
				// Brute force: every slot in (floor, ref], from far enough back.
				start := floor
				if start.IsZero() {
					start = ref.Add(-c.window)
				}
				var all []time.Time
				for t := s.Next(start); !t.IsZero() && !t.After(ref); t = s.Next(t) {
					all = append(all, t)
				}
				slices.Reverse(all)
				want := all[:min(k, len(all))]
				if !slices.EqualFunc(got, want, time.Time.Equal) {
					t.Errorf("Last(%q, k=%d, floor=-%v) = %v, want %v", spec, k, floorBack, got, want)
				}
			}
		}
	}
}

// db is a made-up database: the slots holding a task.
type db map[int64]bool

func (d db) present(_ context.Context, t time.Time) (bool, error) { return d[t.Unix()], nil }

func (d db) add(ts ...time.Time) {
	for _, t := range ts {
		d[t.Unix()] = true
	}
}

func secs(base time.Time, offs ...int) []time.Time {
	var out []time.Time
	for _, o := range offs {
		out = append(out, base.Add(time.Duration(o)*time.Second))
	}
	return out
}

func TestDecide(t *testing.T) {
	every := Every(time.Second)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a slot
	now := base.Add(300 * time.Millisecond)             // just after slot base
	skip := Policy{CatchUp: 0, Grace: time.Minute, Lookback: 1000}
	once := Policy{CatchUp: 1, Grace: time.Minute, Lookback: 1000}
	three := Policy{CatchUp: 3, Grace: time.Minute, Lookback: 1000}
	short := func(p Policy) Policy { p.Grace = 2 * time.Second; return p }
	for _, c := range []struct {
		name    string
		p       Policy
		cursor  time.Time
		now     time.Time
		present []time.Time
		want    []time.Time
		cur     time.Time
	}{
		{"fresh entry, skip: the on-time slot", skip, time.Time{}, now, nil, secs(base, 0), base},
		{"fresh entry, run once: no history, nothing missed", once, time.Time{}, now, nil, secs(base, 0), base},
		{"fresh entry, catch up: no history, nothing missed", three, time.Time{}, now, nil, secs(base, 0), base},
		{"restart within the slot it submitted: nothing", three, time.Time{}, now, secs(base, -2, -1, 0), nil, base},
		{"restart, skip, after a gap: only the on-time slot", skip, time.Time{}, now, secs(base, -10), secs(base, 0), base},
		{"restart, run once, after a gap: the newest missed and the on-time slot", once, time.Time{}, now, secs(base, -10), secs(base, -1, 0), base},
		{"restart, catch up 3 of 9 missed", three, time.Time{}, now, secs(base, -10), secs(base, -3, -2, -1, 0), base},
		{"restart, catch up: 2 missed since the newest present", three, time.Time{}, now, secs(base, -10, -3), secs(base, -2, -1, 0), base},
		{"restart, catch up: missed ones before a present one stay missed", three, time.Time{}, now, secs(base, -10, -1), secs(base, 0), base},
		{"the newest slot beyond grace is missed too", Policy{CatchUp: 0, Grace: 100 * time.Millisecond, Lookback: 1000}, time.Time{}, now, nil, nil, base},
		{"beyond grace with catch up: submitted late", Policy{CatchUp: 1, Grace: 100 * time.Millisecond, Lookback: 1000}, time.Time{}, now, secs(base, -5), secs(base, 0), base},
		{"steady state: the next slot", skip, base.Add(-time.Second), now, nil, secs(base, 0), base},
		{"steady state: nothing new since the cursor", skip, base, now, nil, nil, base},
		{"steady state, stalled within grace: every slot", skip, base.Add(-5 * time.Second), now, nil, secs(base, -4, -3, -2, -1, 0), base},
		{"steady state, stalled beyond grace, skip: the on-time slots", short(skip), base.Add(-5 * time.Second), now, nil, secs(base, -1, 0), base},
		{"steady state, stalled, others submitted meanwhile", three, base.Add(-5 * time.Second), now, secs(base, -4, -3, -2, -1), secs(base, 0), base},
		{"steady state, stalled, nobody submitted: the cursor is the evidence", short(three), base.Add(-10 * time.Second), now, nil, secs(base, -4, -3, -2, -1, 0), base},
		{"steady state, stalled past the lookback", short(once), base.Add(-5000 * time.Second), now, nil, secs(base, -2, -1, 0), base},
		{"lookback bounds the search for history", once, time.Time{}, now, secs(base, -5000), secs(base, 0), base},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := db{}
			d.add(c.present...)
			got, err := Decide(context.Background(), every, c.cursor, c.now, c.p, d.present)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got.Submit, c.want, time.Time.Equal) || !got.Cursor.Equal(c.cur) {
				t.Errorf("Decide = submit %v cursor %v, want %v cursor %v", got.Submit, got.Cursor, c.want, c.cur)
			}
		})
	}
}

// A failing read leaves the cursor where it was.
func TestDecideKeepsTheCursorOnError(t *testing.T) {
	boom := errors.New("boom")
	cursor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := Decide(context.Background(), Every(time.Second), cursor, cursor.Add(1500*time.Millisecond),
		Policy{CatchUp: 1, Grace: time.Minute, Lookback: 10},
		func(context.Context, time.Time) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || !got.Cursor.Equal(cursor) || len(got.Submit) != 0 {
		t.Fatalf("Decide = %+v, %v; want the cursor kept and boom", got, err)
	}
}

// Schedulers evaluating one entry at different moments, each over its own
// view, never submit more than CatchUp late slots between them per gap,
// and every slot from the gap's end on is submitted: simulated over many
// random fleets.
func TestDecideFleetBoundsCatchUp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	every := Every(time.Second)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 300 {
		catchUp := 1 + r.IntN(4)
		p := Policy{CatchUp: catchUp, Grace: time.Minute, Lookback: 1000}
		d := db{}
		d.add(secs(base, -3, -2, -1, 0)...) // history up to base, then every scheduler stops
		gap := 2 + r.IntN(10)
		restart := base.Add(time.Duration(gap) * time.Second)
		// Three schedulers start at random moments over the next few
		// seconds and run until base+30s, evaluating every 100ms.
		type sched struct {
			start, cursor time.Time
		}
		var fleet []*sched
		for range 3 {
			fleet = append(fleet, &sched{start: restart.Add(time.Duration(r.IntN(40)) * 100 * time.Millisecond)}) // on an evaluation step
		}
		for now := restart; now.Before(base.Add(30 * time.Second)); now = now.Add(100 * time.Millisecond) {
			for _, s := range fleet {
				if now.Before(s.start) {
					continue
				}
				dec, err := Decide(context.Background(), every, s.cursor, now, p, d.present)
				if err != nil {
					t.Fatal(err)
				}
				d.add(dec.Submit...)
				s.cursor = dec.Cursor
			}
		}
		first := fleet[0].start
		for _, s := range fleet {
			if s.start.Before(first) {
				first = s.start
			}
		}
		firstOnTime := first.Truncate(time.Second)
		late := 0
		for s := base.Add(time.Second); s.Before(firstOnTime); s = s.Add(time.Second) {
			if d[s.Unix()] {
				late++
			}
		}
		if want := min(catchUp, int(firstOnTime.Sub(base)/time.Second)-1); late != want {
			t.Fatalf("trial %d (catch up %d, gap %d, first start %v): %d late slots submitted, want %d",
				trial, catchUp, gap, first.Sub(base), late, want)
		}
		for s := firstOnTime; s.Before(base.Add(29 * time.Second)); s = s.Add(time.Second) {
			if !d[s.Unix()] {
				t.Fatalf("trial %d: slot %v after the restart was not submitted", trial, s.Sub(base))
			}
		}
	}
}

func ExampleLast() {
	s, _ := Parse("0 9 * * 1-5", nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, t := range Last(s, time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC), time.Time{}, 3) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-01-05T09:00:00Z
	// 2026-01-02T09:00:00Z
	// 2026-01-01T09:00:00Z
}

// A schedule's slots do not depend on the zone of the time asked about,
// time.Local included (robfig reads it as "the zone of t").
func TestNextIgnoresTheZoneOfItsArgument(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no zoneinfo:", err)
	}
	for _, loc := range []*time.Location{nil, time.Local, tokyo} {
		s := mustParse(t, "0 9 * * *", loc)
		a, b, c := s.Next(ref), s.Next(ref.In(tokyo)), s.Next(ref.Local())
		if !a.Equal(b) || !a.Equal(c) {
			t.Errorf("loc %v: Next = %v, %v, %v", loc, a, b, c)
		}
	}
}
