package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/jackc/pgx/v5"
)

// waitSampler samples pg_stat_activity for one database every 10ms during
// a measured window (--wait-events): what its sessions were doing, by
// state and wait event. "active/CPU" means running without waiting;
// "idle/Client:ClientRead" is a session waiting for the client's next
// statement (round-trip time and client-side work); IO:WALSync and
// LWLock:WALWrite are commits waiting for the WAL flush; Lock:* are row or
// transaction lock waits.
type waitSampler struct {
	counts  map[string]int
	samples int
	stop    context.CancelFunc
	done    chan struct{}
}

func startWaitSampler(ctx context.Context, d *pgadmin.Database) (*waitSampler, error) {
	conn, err := d.Server.Conn(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ws := &waitSampler{counts: map[string]int{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(ws.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, `SELECT coalesce(state, '') AS state,
				coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait
				FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, d.Name)
			if err != nil {
				return
			}
			type sw struct{ State, Wait string }
			got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[sw])
			if err != nil {
				return
			}
			ws.samples++
			for _, r := range got {
				ws.counts[r.State+"/"+r.Wait]++
			}
		}
	}()
	return ws, nil
}

// finish stops sampling and returns the mean number of sessions in each
// state/wait over the window, largest first.
func (ws *waitSampler) finish() []waitShare {
	ws.stop()
	<-ws.done
	var out []waitShare
	for k, n := range ws.counts {
		out = append(out, waitShare{k, float64(n) / float64(max(ws.samples, 1))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sessions > out[j].sessions })
	return out
}

type waitShare struct {
	what     string
	sessions float64 // mean sessions in this state
}

func printWaits(w io.Writer, ws []waitShare) {
	fmt.Fprint(w, "      sessions by state/wait (mean over the run):")
	for i, s := range ws {
		if i == 10 || s.sessions < 0.05 {
			break
		}
		fmt.Fprintf(w, "  %s %.1f", s.what, s.sessions)
	}
	fmt.Fprintln(w)
}
