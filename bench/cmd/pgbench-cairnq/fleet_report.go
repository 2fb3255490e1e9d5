package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// perTask divides a count by a phase's tasks ("-" when not measured).
func perTask(v int64, tasks int) string {
	if v < 0 || tasks == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(v)/float64(tasks))
}

// cpuPerTask is CPU ms per task.
func cpuPerTask(d time.Duration, tasks int) string {
	if d < 0 || tasks == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)/float64(tasks))
}

// cpuShare is CPU time over a window as a percentage of one core.
func cpuShare(d, window time.Duration) string {
	if d < 0 || window <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(window))
}

func perSecond(v int64, window time.Duration) string {
	if v < 0 || window <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(v)/window.Seconds())
}

// mibNum is b in MiB, one decimal, no unit (the fleet tables carry it).
func mibNum(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// printFleet prints one system's run at one N, as it ends.
func printFleet(w io.Writer, r fleetResult) {
	fmt.Fprintf(w, "fleet %s N=%d:\n", r.system, r.n)
	i, t, s := r.idle, r.trickle, r.saturated
	fmt.Fprintf(w, "  idle %v: %s statements/s (%s claim path), server CPU %s, fleet CPU %s of a core, %d..%.1f connections\n",
		i.elapsed.Round(time.Millisecond), perSecond(i.statements, i.elapsed), perSecond(i.claimPath, i.elapsed),
		cpuShare(i.serverCPU, i.elapsed), cpuShare(i.fleetCPU, i.elapsed), i.connsMax, i.connsMean)
	fmt.Fprintf(w, "  trickle %d tasks in %v: %s statements/task (%s claim path), %s commits/task, server %s / fleet %s CPU ms/task, submit-to-start p50 %s p95 %s (%d), connections max %d mean %.1f\n",
		t.tasks, t.elapsed.Round(time.Millisecond), perTask(t.statements, t.tasks), perTask(t.claimPath, t.tasks), perTask(t.commits, t.tasks),
		cpuPerTask(t.serverCPU, t.tasks), cpuPerTask(t.fleetCPU, t.tasks), ms(pct(t.lat, 50)), ms(pct(t.lat, 95)), len(t.lat), t.connsMax, t.connsMean)
	printTop(w, t)
	fmt.Fprintf(w, "  saturated %d tasks in %v (%.0f tasks/s): %s statements/task (%s claim path), %s commits/task, server %s / fleet %s CPU ms/task, connections max %d mean %.1f\n",
		s.tasks, s.elapsed.Round(time.Millisecond), float64(s.tasks)/s.elapsed.Seconds(), perTask(s.statements, s.tasks), perTask(s.claimPath, s.tasks),
		perTask(s.commits, s.tasks), cpuPerTask(s.serverCPU, s.tasks), cpuPerTask(s.fleetCPU, s.tasks), s.connsMax, s.connsMean)
	printTop(w, s)
	fmt.Fprintf(w, "  peak RSS per process (VmHWM) max/mean: idle+trickle %s/%s MiB, saturated %s/%s MiB\n",
		mibNum(r.hwmIdle[0]), mibNum(r.hwmIdle[1]), mibNum(r.hwmSat[0]), mibNum(r.hwmSat[1]))
}

func printTop(w io.Writer, ph fleetPhase) {
	for _, s := range ph.top {
		q := strings.Join(strings.Fields(s.query), " ")
		if len(q) > 100 {
			q = q[:100] + "..."
		}
		fmt.Fprintf(w, "      %8s/task  %s\n", perTask(s.calls, ph.tasks), q)
	}
}

// printFleetTable prints the markdown tables docs/benchmarks.md takes.
func printFleetTable(w io.Writer, cfg *config, rs []fleetResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### fleet: concurrency %d per process, pool %d, trickle %d/s for %v, backlog %d\n\n",
		cfg.fleetConc, cfg.fleetPool, cfg.fleetRate, cfg.fleetWindow, cfg.fleetBacklog)
	fmt.Fprintln(w, "| system | N | idle: statements/s, server / fleet CPU | trickle: statements/task (claim path) | server / fleet CPU ms/task | submit-to-start p50 / p95 | connections max (mean) | peak RSS MiB max / mean |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		i, t := r.idle, r.trickle
		fmt.Fprintf(w, "| %s | %d | %s, %s / %s | %s (%s) | %s / %s | %s / %s | %d (%.1f) | %s / %s |\n", r.system, r.n,
			perSecond(i.statements, i.elapsed), cpuShare(i.serverCPU, i.elapsed), cpuShare(i.fleetCPU, i.elapsed),
			perTask(t.statements, t.tasks), perTask(t.claimPath, t.tasks), cpuPerTask(t.serverCPU, t.tasks), cpuPerTask(t.fleetCPU, t.tasks),
			ms(pct(t.lat, 50)), ms(pct(t.lat, 95)), t.connsMax, t.connsMean, mibNum(r.hwmIdle[0]), mibNum(r.hwmIdle[1]))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | N | saturated tasks/s | statements/task (claim path) | commits/task | server / fleet CPU ms/task | connections max (mean) | peak RSS MiB max / mean |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		s := r.saturated
		fmt.Fprintf(w, "| %s | %d | %.0f | %s (%s) | %s | %s / %s | %d (%.1f) | %s / %s |\n", r.system, r.n,
			float64(s.tasks)/s.elapsed.Seconds(), perTask(s.statements, s.tasks), perTask(s.claimPath, s.tasks), perTask(s.commits, s.tasks),
			cpuPerTask(s.serverCPU, s.tasks), cpuPerTask(s.fleetCPU, s.tasks), s.connsMax, s.connsMean, mibNum(r.hwmSat[0]), mibNum(r.hwmSat[1]))
	}
}
