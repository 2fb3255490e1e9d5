package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
)

// freeOSMemory returns what the Go heap no longer uses to the OS, so that
// a window's peak RSS does not carry the setup's.
func freeOSMemory() { debug.FreeOSMemory() }

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux:
// "5" written to clear_refs).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is this process's VmHWM in bytes (0 when unreadable).
func peakRSS() int64 { return procStatusKB(os.Getpid(), "VmHWM") }

// procStatusKB reads one "kB" field of /proc/<pid>/status, in bytes.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return n << 10
	}
	return 0
}

// serverRSS samples the summed VmRSS and RssAnon of a database's server
// backends every 100ms, from its own goroutine, until stop.
type serverRSS struct {
	stopCh    chan struct{}
	done      chan struct{}
	rss, anon int64
}

func startServerRSS(ctx context.Context, db *pgadmin.Database) *serverRSS {
	s := &serverRSS{stopCh: make(chan struct{}), done: make(chan struct{})}
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		defer conn.Close(context.WithoutCancel(ctx))
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample(ctx, conn, db.Name)
			select {
			case <-s.stopCh:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *serverRSS) sample(ctx context.Context, conn *pgx.Conn, name string) {
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	if err != nil {
		return
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return
	}
	var rss, anon int64
	for _, pid := range pids {
		rss += procStatusKB(int(pid), "VmRSS")
		anon += procStatusKB(int(pid), "RssAnon")
	}
	s.rss, s.anon = max(s.rss, rss), max(s.anon, anon)
}

// stop ends the sampling and returns the peaks.
func (s *serverRSS) stop() (rss, anon int64) {
	select {
	case <-s.done:
	default:
		close(s.stopCh)
		<-s.done
	}
	return s.rss, s.anon
}
