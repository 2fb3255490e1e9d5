package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type callDelta struct {
	queries, txs, txQueries                int64
	claims, claimRows, settles, settleRows int64
	queryTime, txTime                      time.Duration
}

func (c callDelta) sub(o callDelta) callDelta {
	return callDelta{queries: c.queries - o.queries, txs: c.txs - o.txs, txQueries: c.txQueries - o.txQueries,
		claims: c.claims - o.claims, claimRows: c.claimRows - o.claimRows, settles: c.settles - o.settles, settleRows: c.settleRows - o.settleRows,
		queryTime: c.queryTime - o.queryTime, txTime: c.txTime - o.txTime}
}

type burnResult struct {
	system       string
	run, n       int
	elapsed      time.Duration // Start/Run until the database shows every task done
	handlersDone time.Duration // until the last handler call returned
	server       counters
	calls        *callDelta
	// clientCPU and serverCPU are the CPU time this process and the
	// server's processes spent in the timed window (serverCPU -1: unknown).
	clientCPU, serverCPU time.Duration
	// allocBytes and allocObjects are what this process allocated on the
	// Go heap in the timed window (heapAllocs).
	allocBytes, allocObjects uint64
	statements               []stmtStat
	waits                    []waitShare
}

func (r burnResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

type rateResult struct {
	system     string
	goroutines int
	run, n     int
	elapsed    time.Duration
	waits      []waitShare
}

func (r rateResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

type latResult struct {
	system string
	listen bool
	run    int
	lat    []time.Duration // handler start - submit start
	submit []time.Duration // Submit call duration
	// afterSubmit is handler start - Submit's return: the wakeup path
	// alone (NOTIFY or poll, claim, dispatch), without the submit's commit.
	afterSubmit []time.Duration
}

type failure struct {
	what string
	err  error
}

// report collects results, prints a line per measurement as it ends, and
// tables plus paste-ready lines at the end.
type report struct {
	cfg   *config
	burns []burnResult
	rates []rateResult
	lats  []latResult
	fails []failure
}

func (rp *report) fail(what string, err error) {
	fmt.Printf("  %-34s FAILED: %v\n", what, err)
	rp.fails = append(rp.fails, failure{what, err})
}

func (rp *report) addBurn(r burnResult, system string, run int, err error) {
	what := fmt.Sprintf("burndown run %d %s", run, system)
	if err != nil {
		rp.fail(what, err)
		return
	}
	rp.burns = append(rp.burns, r)
	line := fmt.Sprintf("  %-34s %8.0f tasks/s  (%v; last handler returned at %v)", what, r.rate(), r.elapsed.Round(time.Millisecond), r.handlersDone.Round(time.Millisecond))
	if r.server.ok {
		line += fmt.Sprintf("  commits/task %.3f, WAL fsyncs %d, WAL %.0f B/task",
			float64(r.server.commits)/float64(r.n), r.server.walSyncs, float64(r.server.walBytes)/float64(r.n))
	}
	if r.clientCPU > 0 {
		line += fmt.Sprintf("  CPU ms/1k tasks: client %.0f", cpuPer1k(r.clientCPU, r.n))
		if r.serverCPU >= 0 {
			line += fmt.Sprintf(", server %.0f", cpuPer1k(r.serverCPU, r.n))
		}
	}
	if r.allocBytes > 0 {
		line += fmt.Sprintf("  heap alloc/task: %.0f B, %.1f objects", float64(r.allocBytes)/float64(r.n), float64(r.allocObjects)/float64(r.n))
	}
	if r.calls != nil {
		c := r.calls
		rt := float64(c.queries+c.txQueries+2*c.txs) / float64(r.n)
		line += fmt.Sprintf("\n      seam calls per task: %.3f statements outside tx (mean %s), %.3f tx (mean %s, %.2f statements each) = ~%.2f round trips/task",
			float64(c.queries)/float64(r.n), ms(meanDur(c.queryTime, c.queries)), float64(c.txs)/float64(r.n), ms(meanDur(c.txTime, c.txs)),
			float64(c.txQueries)/float64(max(c.txs, 1)), rt)
		line += fmt.Sprintf("\n      claims: %d statements, %.1f tasks each; complete_many: %d statements, %.1f tasks each",
			c.claims, float64(c.claimRows)/float64(max(c.claims, 1)), c.settles, float64(c.settleRows)/float64(max(c.settles, 1)))
	}
	fmt.Println(line)
	if len(r.waits) > 0 {
		printWaits(os.Stdout, r.waits)
	}
	if len(r.statements) > 0 {
		printStatements(os.Stdout, r.statements, r.n)
	}
}

func meanDur(d time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

func cpuPer1k(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) * 1000 / float64(n)
}

func (rp *report) addRate(r rateResult, system string, g, run int, err error) {
	what := fmt.Sprintf("submit run %d %s g=%d", run, system, g)
	if err != nil {
		rp.fail(what, err)
		return
	}
	rp.rates = append(rp.rates, r)
	fmt.Printf("  %-34s %8.0f tasks/s  (%d in %v)\n", what, r.rate(), r.n, r.elapsed.Round(time.Millisecond))
	if len(r.waits) > 0 {
		printWaits(os.Stdout, r.waits)
	}
}

func (rp *report) addLat(r latResult, system string, listen bool, run int, err error) {
	what := fmt.Sprintf("latency run %d %s LISTEN %s", run, system, onOff(listen))
	if err != nil {
		rp.fail(what, err)
		return
	}
	rp.lats = append(rp.lats, r)
	fmt.Printf("  %-34s p50 %s  p95 %s  p99 %s  max %s  (n=%d; Submit call p50 %s p95 %s; after Submit returned p50 %s p95 %s)\n", what,
		ms(pct(r.lat, 50)), ms(pct(r.lat, 95)), ms(pct(r.lat, 99)), ms(pct(r.lat, 100)), len(r.lat),
		ms(pct(r.submit, 50)), ms(pct(r.submit, 95)), ms(pct(r.afterSubmit, 50)), ms(pct(r.afterSubmit, 95)))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", msf(d)) }

// msf is d in milliseconds, for the figures written as numbers.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func joinRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " / ")
}

func (rp *report) burnRates(system string) []float64 {
	var out []float64
	for _, r := range rp.burns {
		if r.system == system {
			out = append(out, r.rate())
		}
	}
	return out
}

func (rp *report) print(w io.Writer) {
	cfg := rp.cfg
	fmt.Fprintln(w)
	var paste []string

	if len(rp.burns) > 0 || slices.Contains(cfg.benches, "burndown") {
		fmt.Fprintf(w, "== Burn-down: %d no-op tasks, concurrency %d, pool %d (tasks/s, start until the database shows all done) ==\n",
			cfg.tasks, cfg.concurrency, cfg.pool)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\truns\tmedian\tvs River\tvs pgx\tcommits/task\tWAL fsyncs/1k tasks\tWAL B/task\tclient CPU ms/1k\tserver CPU ms/1k\t")
		river := median(rp.burnRates("river"))
		pgx := median(rp.burnRates("pgx"))
		systems := []string{}
		if !cfg.noRiver {
			systems = append(systems, "river")
		}
		if cfg.floor {
			systems = append(systems, floorSystems...)
		}
		for _, a := range cfg.adapters {
			systems = append(systems, a.name)
		}
		var adapterParts []string
		for _, sys := range systems {
			label := sys
			switch {
			case sys == "river":
				label = "River " + riverVersion
			case isFloor(sys):
				label = floorLabel(sys)
			default:
				label = "cairnq " + sys
			}
			if a, err := findAdapter(sys); err == nil && a.todo != "" {
				fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\t\t\n", label, "TODO (adapter not ready)")
				adapterParts = append(adapterParts, sys+": TODO")
				continue
			}
			rates := rp.burnRates(sys)
			if len(rates) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\t\t\n", label, "failed")
				continue
			}
			med := median(rates)
			vsRiver, vsPgx := "", ""
			if river > 0 && sys != "river" {
				vsRiver = fmt.Sprintf("%.2fx", med/river)
			}
			if pgx > 0 && sys != "river" {
				vsPgx = fmt.Sprintf("%.2fx", med/pgx)
			}
			var commits, syncs, wal, ccpu, scpu []float64
			for _, r := range rp.burns {
				if r.system != sys {
					continue
				}
				if r.server.ok {
					commits = append(commits, float64(r.server.commits)/float64(r.n))
					syncs = append(syncs, float64(r.server.walSyncs)*1000/float64(r.n))
					wal = append(wal, float64(r.server.walBytes)/float64(r.n))
				}
				ccpu = append(ccpu, cpuPer1k(r.clientCPU, r.n))
				if r.serverCPU >= 0 {
					scpu = append(scpu, cpuPer1k(r.serverCPU, r.n))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%.3f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", label, joinRates(rates), med, vsRiver, vsPgx,
				median(commits), median(syncs), median(wal), median(ccpu), median(scpu))
			switch {
			case sys == "river":
			case isFloor(sys):
				line := fmt.Sprintf("%s (%s): %.0f tasks/s (runs %s)", floorLabel(sys), floorShape(cfg, sys), med, joinRates(rates))
				if river > 0 {
					line += fmt.Sprintf(", %.2fx River", med/river)
				}
				paste = append(paste, line+".")
			case sys == "pgx":
				line := fmt.Sprintf("Burn-down, %d no-op tasks at concurrency %d (pool %d), Postgres via pgx: cairnq %.0f tasks/s (runs %s)",
					cfg.tasks, cfg.concurrency, cfg.pool, med, joinRates(rates))
				if river > 0 {
					line += fmt.Sprintf("; River %s %.0f jobs/s (runs %s) in the same run; cairnq/River = %.2fx",
						riverVersion, river, joinRates(rp.burnRates("river")), med/river)
				}
				paste = append(paste, line+".")
				adapterParts = append(adapterParts, fmt.Sprintf("pgx %.0f tasks/s (1.00x)", med))
			default:
				part := fmt.Sprintf("%s %.0f tasks/s", sys, med)
				if pgx > 0 {
					part += fmt.Sprintf(" (%.2fx pgx)", med/pgx)
				}
				adapterParts = append(adapterParts, part)
			}
		}
		tw.Flush()
		if len(adapterParts) > 1 {
			paste = append(paste, fmt.Sprintf("Burn-down by adapter (%d no-op tasks, concurrency %d, median of %d runs): %s.",
				cfg.tasks, cfg.concurrency, cfg.runs, strings.Join(adapterParts, "; ")))
		}
		fmt.Fprintln(w)
	}

	if len(rp.rates) > 0 {
		fmt.Fprintf(w, "== Submit throughput: %d submits of a no-op task per measurement (tasks/s) ==\n", cfg.submitN)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\tgoroutines\truns\tmedian\t")
		type key struct {
			sys string
			g   int
		}
		var keys []key
		by := map[key][]float64{}
		for _, r := range rp.rates {
			k := key{r.system, r.goroutines}
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], r.rate())
		}
		perSys := map[string][]string{}
		var sysOrder []string
		for _, k := range keys {
			label := "cairnq " + k.sys
			if k.sys == "river" {
				label = "River " + riverVersion + " Insert"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t\n", label, k.g, joinRates(by[k]), median(by[k]))
			if _, ok := perSys[k.sys]; !ok {
				sysOrder = append(sysOrder, k.sys)
			}
			perSys[k.sys] = append(perSys[k.sys], fmt.Sprintf("%d goroutine%s %.0f tasks/s (runs %s)", k.g, plural(k.g), median(by[k]), joinRates(by[k])))
		}
		tw.Flush()
		for _, sys := range sysOrder {
			who := "cairnq Submit via " + sys
			if sys == "river" {
				who = "River " + riverVersion + " Insert (reference)"
			}
			paste = append(paste, fmt.Sprintf("Submit throughput, %s: %s.", who, strings.Join(perSys[sys], "; ")))
		}
		fmt.Fprintln(w)
	}

	if len(rp.lats) > 0 {
		fmt.Fprintln(w, "== Enqueue-to-handler-start latency: idle worker (PollInterval 500ms), submits from another client, one at a time ==")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "adapter\tLISTEN\trun\tn\tp50\tp95\tp99\tmax\tSubmit p50\tSubmit p95\tafter-Submit p50\tafter-Submit p95\t")
		type key struct {
			sys    string
			listen bool
		}
		var keys []key
		pooled := map[key][]time.Duration{}
		pooledAfter := map[key][]time.Duration{}
		pooledSubmit := map[key][]time.Duration{}
		perRun := map[key][]string{}
		for _, r := range rp.lats {
			k := key{r.system, r.listen}
			if _, ok := pooled[k]; !ok {
				keys = append(keys, k)
			}
			pooled[k] = append(pooled[k], r.lat...)
			pooledAfter[k] = append(pooledAfter[k], r.afterSubmit...)
			pooledSubmit[k] = append(pooledSubmit[k], r.submit...)
			perRun[k] = append(perRun[k], ms(pct(r.lat, 95)))
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.system, onOff(r.listen), r.run, len(r.lat),
				ms(pct(r.lat, 50)), ms(pct(r.lat, 95)), ms(pct(r.lat, 99)), ms(pct(r.lat, 100)),
				ms(pct(r.submit, 50)), ms(pct(r.submit, 95)), ms(pct(r.afterSubmit, 50)), ms(pct(r.afterSubmit, 95)))
		}
		for _, k := range keys {
			l, la, ls := pooled[k], pooledAfter[k], pooledSubmit[k]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.sys, onOff(k.listen), "all", len(l),
				ms(pct(l, 50)), ms(pct(l, 95)), ms(pct(l, 99)), ms(pct(l, 100)),
				ms(pct(ls, 50)), ms(pct(ls, 95)), ms(pct(la, 50)), ms(pct(la, 95)))
			paste = append(paste, fmt.Sprintf("Enqueue-to-handler-start via %s, LISTEN %s: p50 %s, p95 %s, p99 %s (n=%d over %d runs; p95 per run %s). "+
				"Split: the Submit call p50 %s, p95 %s; Submit's return to handler start p50 %s, p95 %s.",
				k.sys, onOff(k.listen), ms(pct(l, 50)), ms(pct(l, 95)), ms(pct(l, 99)), len(l), len(perRun[k]), strings.Join(perRun[k], " / "),
				ms(pct(ls, 50)), ms(pct(ls, 95)), ms(pct(la, 50)), ms(pct(la, 95))))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	if len(rp.fails) > 0 {
		fmt.Fprintln(w, "== Failures ==")
		for _, f := range rp.fails {
			fmt.Fprintf(w, "  %s: %v\n", f.what, f.err)
		}
		fmt.Fprintln(w)
	}
	if len(paste) > 0 {
		fmt.Fprintln(w, "== For the docs ==")
		for _, p := range paste {
			fmt.Fprintln(w, p)
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
