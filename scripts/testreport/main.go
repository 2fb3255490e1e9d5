// Command testreport turns the `go test -json` stream of one module into
// what a person at a terminal wants from scripts/test: a line per package
// as it finishes, a line every half minute while a long package runs, the
// whole output of whatever failed, and at the end of the run the tests that
// were skipped, grouped by the reason they gave, since a reason is what says
// how to run them.
//
// scripts/test runs it twice. Per module:
//
//	go test -json ./... | testreport -module ./adapters/gorm -skips FILE
//
// reads the stream on stdin, prints the module's packages, appends one JSON
// line per skipped test to FILE, and exits 1 if anything failed. At the end:
//
//	testreport -summary FILE
//
// prints the skipped tests of every module.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

func main() {
	module := flag.String("module", ".", "the module the stream comes from, for the skip file")
	skips := flag.String("skips", "", "append the skipped tests to this file, one JSON object per line")
	summary := flag.String("summary", "", "print the skipped tests recorded in this file and exit")
	echo := flag.Bool("echo", false, "print every test's output as it comes (go test -v)")
	heartbeat := flag.Duration("heartbeat", 30*time.Second, "how often to say what is still running")
	flag.Parse()

	if *summary != "" {
		if err := printSummary(os.Stdout, *summary); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
		return
	}

	r := newReport(os.Stdout, *module, *echo)
	ok, err := r.read(os.Stdin, *heartbeat)
	if err == nil && *skips != "" {
		err = r.appendSkips(*skips)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output and build-fail events
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// Skip is one skipped test, as the skip file holds it.
type Skip struct {
	Module  string `json:"module"`
	Package string `json:"package"`
	Test    string `json:"test"`
	Reason  string `json:"reason"`
}

// pkgState is what the report keeps about a package until it ends.
type pkgState struct {
	output  []string            // package-level lines: a panic or a timeout shows here
	tests   map[string][]string // each test's lines, until it ends
	passed  int
	failed  int
	skipped int
	bench   bool
	partial string // a benchmark's output line not yet ended
}

type report struct {
	w      io.Writer
	module string
	echo   bool

	pkgs     map[string]*pkgState
	running  []string // packages started and not ended, in start order
	started  bool     // a package has started
	builds   map[string][]string
	skips    []Skip
	noTests  []string // packages with test files of which none ran
	failures int
	ended    int
}

func newReport(w io.Writer, module string, echo bool) *report {
	return &report{
		w:      w,
		module: module,
		echo:   echo,
		pkgs:   map[string]*pkgState{},
		builds: map[string][]string{},
	}
}

// read consumes the stream, printing as it goes, and says whether every
// package passed. A line that is not JSON (go test's own complaints before
// any package runs) is printed as it is.
func (r *report) read(in io.Reader, heartbeat time.Duration) (bool, error) {
	lines := make(chan string)
	readErr := make(chan error, 1)
	// The reader goroutine ends when stdin does; read waits for that below.
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
	}()

	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case line, more := <-lines:
			if !more {
				if err := <-readErr; err != nil {
					return false, err
				}
				if n := len(r.noTests); n > 0 {
					fmt.Fprintf(r.w, "  %d of the module's packages ran no tests (check -run)\n", n)
				}
				return r.failures == 0 && len(r.running) == 0, nil
			}
			r.line(line)
		case <-tick.C:
			switch {
			case len(r.running) > 0:
				fmt.Fprintf(r.w, "   … %s: running %s\n", time.Since(start).Round(time.Second), strings.Join(r.running, ", "))
			case !r.started:
				// go test builds before any package starts: minutes the
				// first time, with -race.
				fmt.Fprintf(r.w, "   … %s: building the tests\n", time.Since(start).Round(time.Second))
			}
		}
	}
}

func (r *report) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
		fmt.Fprintln(r.w, line)
		return
	}
	switch e.Action {
	case "build-output":
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		return // the package's own fail event follows, naming the build
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkgState{tests: map[string][]string{}}
		r.pkgs[e.Package] = p
	}
	if e.Test == "" {
		r.packageEvent(p, e)
		return
	}
	if strings.HasPrefix(e.Test, "Benchmark") {
		p.bench = true
	}
	switch e.Action {
	case "output":
		p.tests[e.Test] = append(p.tests[e.Test], e.Output)
		if r.echo {
			fmt.Fprint(r.w, e.Output)
		} else if p.bench {
			// A benchmark's result lines, which test2json follows with no
			// pass event, are what someone running benchmarks came for.
			// They come in pieces: the name, then the figures.
			p.partial += e.Output
			if i := strings.LastIndexByte(p.partial, '\n'); i >= 0 {
				printBench(r.w, strings.SplitAfter(p.partial[:i+1], "\n"))
				p.partial = p.partial[i+1:]
			}
		}
	case "pass":
		p.passed++
		delete(p.tests, e.Test)
	case "skip":
		p.skipped++
		r.skips = append(r.skips, Skip{Module: r.module, Package: e.Package, Test: e.Test, Reason: skipReason(p.tests[e.Test])})
		delete(p.tests, e.Test)
	case "fail":
		p.failed++
		// A parent fails with its subtest; print each test once, the
		// innermost first, as go test does.
		if !r.echo {
			fmt.Fprint(r.w, strings.Join(p.tests[e.Test], ""))
		}
		delete(p.tests, e.Test)
	}
}

func (r *report) packageEvent(p *pkgState, e event) {
	switch e.Action {
	case "start":
		r.running, r.started = append(r.running, e.Package), true
	case "output":
		p.output = append(p.output, e.Output)
		if r.echo {
			fmt.Fprint(r.w, e.Output)
		}
	case "pass", "skip", "fail":
		r.running = remove(r.running, e.Package)
		r.ended++
		status := "ok  "
		if e.Action == "fail" {
			status = "FAIL"
			r.failures++
			if !r.echo {
				if e.FailedBuild != "" {
					fmt.Fprint(r.w, strings.Join(r.builds[e.FailedBuild], ""))
				}
				// Lines no test claims: a panic, a timeout, TestMain's
				// own complaint.
				fmt.Fprint(r.w, strings.Join(unclaimed(p.output), ""))
				for _, lines := range p.tests {
					fmt.Fprint(r.w, strings.Join(lines, ""))
				}
			}
		} else if p.bench && !r.echo {
			printBench(r.w, p.output)
		}
		if e.Action == "skip" && p.passed+p.failed+p.skipped == 0 {
			return // a package with no test files
		}
		if p.passed+p.failed+p.skipped == 0 && !p.bench {
			// go test says so too: a -run that matches nothing is not a
			// pass to take on trust.
			r.noTests = append(r.noTests, e.Package)
			fmt.Fprintf(r.w, "  %s %s %.1fs: [no tests to run]\n", status, e.Package, e.Elapsed)
			return
		}
		fmt.Fprintf(r.w, "  %s %s %.1fs: %s\n", status, e.Package, e.Elapsed, counts(p))
	}
}

func counts(p *pkgState) string {
	parts := []string{fmt.Sprintf("%d passed", p.passed)}
	if p.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", p.failed))
	}
	if p.skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", p.skipped))
	}
	return strings.Join(parts, ", ")
}

// unclaimed drops the lines go test writes itself at a package's end.
func unclaimed(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l == "PASS\n" || l == "FAIL\n" || strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "FAIL\t") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// printBench prints the benchmark result lines and the header go test
// gives them.
func printBench(w io.Writer, lines []string) {
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "Benchmark") && strings.Contains(t, "\t") ||
			strings.HasPrefix(t, "goos:") || strings.HasPrefix(t, "goarch:") ||
			strings.HasPrefix(t, "pkg:") || strings.HasPrefix(t, "cpu:") {
			fmt.Fprintln(w, "    "+t)
		}
	}
}

var logLine = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)

// skipReason is the last thing the test logged before its skip, which is
// the message it gave t.Skip.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], "\n")
		if m := logLine.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return "(no reason given)"
}

func remove(list []string, s string) []string {
	for i, v := range list {
		if v == s {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

func (r *report) appendSkips(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range r.skips {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// printSummary groups the recorded skips by reason, the most common first,
// naming the tests of each (a few of them) and where they live.
func printSummary(w io.Writer, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	type group struct {
		reason string
		tests  []string
		where  map[string]bool
	}
	groups := map[string]*group{}
	dec := json.NewDecoder(f)
	for {
		var s Skip
		if err := dec.Decode(&s); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		g := groups[s.Reason]
		if g == nil {
			g = &group{reason: s.Reason, where: map[string]bool{}}
			groups[s.Reason] = g
		}
		g.tests = append(g.tests, s.Test)
		g.where[s.Package] = true
	}
	if len(groups) == 0 {
		fmt.Fprintln(w, "scripts/test: nothing was skipped")
		return nil
	}
	list := make([]*group, 0, len(groups))
	total := 0
	for _, g := range groups {
		list = append(list, g)
		total += len(g.tests)
	}
	sort.Slice(list, func(i, j int) bool {
		if len(list[i].tests) != len(list[j].tests) {
			return len(list[i].tests) > len(list[j].tests)
		}
		return list[i].reason < list[j].reason
	})
	fmt.Fprintf(w, "scripts/test: %d tests skipped, by the reason they gave:\n", total)
	for _, g := range list {
		names := g.tests
		more := ""
		if len(names) > 3 {
			more = fmt.Sprintf(" and %d more", len(names)-3)
			names = names[:3]
		}
		fmt.Fprintf(w, "  %d × %s\n      %s%s (%s)\n", len(g.tests), g.reason, strings.Join(names, ", "), more, strings.Join(sortedKeys(g.where), ", "))
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
