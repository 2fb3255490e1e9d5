package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clkTck is USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clkTck = 100

// clientCPU is this process's user+system CPU time so far.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs is what this process has allocated on the Go heap so far:
// bytes and objects (runtime/metrics, read without stopping the world).
// Both cairnq and River run in this process, so the difference across a
// timed window is what the system under test allocated in it.
func heapAllocs() (bytes, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// cpuSnapshot is the CPU time of every server process, by pid.
type cpuSnapshot map[int]time.Duration

// serverCPU reads the CPU time of every process pg_stat_activity lists
// (client backends and the background processes: WAL writer,
// checkpointer, autovacuum, ...) from /proc. It returns nil when the
// server does not run on this machine (or /proc is not readable).
func (s *server) serverCPU(ctx context.Context) cpuSnapshot {
	conn, err := s.Conn(ctx)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	rows.Close()
	snap := cpuSnapshot{}
	for _, pid := range pids {
		if d, ok := procCPU(pid); ok {
			snap[pid] = d
		}
	}
	if len(snap) == 0 {
		return nil
	}
	return snap
}

// since is the CPU the server spent between before and s: processes that
// started in between count from zero; those that exited in between are
// lost (the pools under test stay open through the window).
func (s cpuSnapshot) since(before cpuSnapshot) time.Duration {
	if s == nil || before == nil {
		return -1
	}
	var total time.Duration
	for pid, d := range s {
		total += d - before[pid]
	}
	return total
}

func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the parenthesized command name, which may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clkTck, true
}
