package maintenance

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// endedSim is a table of ended records for recentLook's reads: each ends
// at ms by the database's clock and commits at commit by the worker's.
type endedSim struct {
	now   time.Time // the worker's clock
	skew  time.Duration
	recs  []simEnd
	reads map[string]int // how many reads read each record
	walks int
}

type simEnd struct {
	pos    engine.EndedFrom
	commit time.Time
}

// end adds a record that ended at the database's now and commits after
// late.
func (s *endedSim) end(id string, late time.Duration) {
	s.recs = append(s.recs, simEnd{
		pos:    engine.EndedFrom{MS: s.now.Add(s.skew).UnixMilli(), ID: id},
		commit: s.now.Add(late),
	})
	sort.Slice(s.recs, func(i, j int) bool { return endedBefore(s.recs[i].pos, s.recs[j].pos) })
}

// walk reads, as one walk at the worker's now, the committed records
// after from, and returns the last one read.
func (s *endedSim) walk(from engine.EndedFrom) engine.EndedFrom {
	s.walks++
	for _, r := range s.recs {
		if endedBefore(from, r.pos) && !r.commit.After(s.now) {
			s.reads[r.pos.ID]++
			from = r.pos
		}
	}
	return from
}

func (s *endedSim) read(l *recentLook) {
	l.read(func() time.Time { return s.now }, s.walk)
}

func newEndedSim(skew time.Duration) *endedSim {
	return &endedSim{now: time.Unix(1_000_000, 0), skew: skew, reads: map[string]int{}}
}

// Once nothing ends, a worker's reads of the ended records stop reading
// the ones they read: at most endedSlack (and a read) later, not every
// sweep for as long as nothing new ends. Before, every read re-read the
// records that ended in the endedSlack before the newest one.
func TestRecentLookStopsRereadingWhenIdle(t *testing.T) {
	for _, skew := range []time.Duration{0, 3 * time.Second, -3 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			s := newEndedSim(skew)
			var l recentLook
			s.read(&l)
			for i := range 20 {
				s.end(fmt.Sprint("r", i), 0)
				s.now = s.now.Add(100 * time.Millisecond)
			}
			for range 30 { // a minute of sweeps every 2 s
				s.now = s.now.Add(2 * time.Second)
				s.read(&l)
			}
			for id, n := range s.reads {
				if n < 1 || n > 3 {
					t.Errorf("%s read %d times, want 1 to 3", id, n)
				}
			}
			if len(s.reads) != 20 {
				t.Errorf("%d records read, want 20", len(s.reads))
			}
			before := len(s.reads)
			total := 0
			for _, n := range s.reads {
				total += n
			}
			s.now = s.now.Add(2 * time.Second)
			s.read(&l)
			after := 0
			for _, n := range s.reads {
				after += n
			}
			if after != total || len(s.reads) != before {
				t.Errorf("a read a minute after the last end read %d records again", after-total)
			}
		})
	}
}

// An end that commits after ends taken later, which a read already
// passed, is still read, however the database's clock stands to the
// worker's; and under a steady stream of ends each is read at most three
// times (as it comes, and by at most two reads from the floor).
func TestRecentLookReadsLateCommits(t *testing.T) {
	for _, skew := range []time.Duration{0, 90 * time.Second, -30 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			s := newEndedSim(skew)
			rng := rand.New(rand.NewPCG(1, uint64(skew)))
			var l recentLook
			s.read(&l)
			nextRead := s.now.Add(2 * time.Second)
			ended := 0
			for range 3000 { // five minutes, an end every 100 ms
				late := time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
				if rng.IntN(20) == 0 {
					late = time.Duration(rng.Int64N(int64(endedSlack - 100*time.Millisecond)))
				}
				s.end(fmt.Sprint("r", ended), late)
				ended++
				s.now = s.now.Add(100 * time.Millisecond)
				if !s.now.Before(nextRead) {
					s.read(&l)
					nextRead = s.now.Add(2*time.Second + time.Duration(rng.Int64N(int64(200*time.Millisecond))))
				}
			}
			s.now = s.now.Add(endedSlack + time.Second)
			s.read(&l)
			s.now = s.now.Add(endedSlack + time.Second)
			s.read(&l)
			total := 0
			for i := range ended {
				n := s.reads[fmt.Sprint("r", i)]
				if n < 1 || n > 3 {
					t.Errorf("r%d read %d times, want 1 to 3", i, n)
				}
				total += n
			}
			t.Logf("%d ends, %d walks read %d records", ended, s.walks, total)
		})
	}
}
