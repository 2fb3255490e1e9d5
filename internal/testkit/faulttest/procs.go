package faulttest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is one child process and everything it printed.
type proc struct {
	name string
	out  string // its output file
	cmd  *exec.Cmd
	log  bytes.Buffer // stdout and stderr; read only after done
	done chan struct{}
	err  error // Wait's result, set before done closes
}

// exited reports whether the child has exited, without blocking.
func (c *proc) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// procs owns a test's child processes: each is killed, if still running,
// when the test ends.
type procs struct {
	t        *testing.T
	b        Backend
	dir      string
	env      []string
	children []*proc
}

// newProcs returns the harness for t's children, which write their output
// files in dir and get env besides what spawn gives each.
func newProcs(t *testing.T, b Backend, dir string, env ...string) *procs {
	p := &procs{t: t, b: b, dir: dir, env: env}
	t.Cleanup(func() {
		for _, c := range p.children {
			if !c.exited() {
				c.cmd.Process.Kill()
				<-c.done
			}
		}
	})
	return p
}

// spawn starts the test binary as a child in role.
func (p *procs) spawn(name, role string, env ...string) *proc {
	p.t.Helper()
	c := &proc{name: name, out: filepath.Join(p.dir, name+".out"), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+p.b.ChildTest+"$", "-test.count=1", "-test.v", "-test.timeout=3m")
	c.cmd.Env = append(os.Environ(), envRole+"="+role, envOut+"="+c.out)
	c.cmd.Env = append(append(c.cmd.Env, p.env...), env...)
	c.cmd.Stdout = &c.log
	c.cmd.Stderr = &c.log
	if err := c.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", name, err)
	}
	p.children = append(p.children, c)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c
}

// kill sends SIGKILL to c and waits for it to be gone.
func (p *procs) kill(c *proc) {
	p.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !c.exited() {
		p.t.Fatalf("kill %s: %v", c.name, err)
	}
	<-c.done
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s was not killed by SIGKILL but ended with %v; output:\n%s", c.name, c.err, c.log.String())
	}
}

// fatal ends the test, first making every running child print its
// goroutines (SIGQUIT) and showing what each printed.
func (p *procs) fatal(format string, a ...any) {
	p.t.Helper()
	for _, c := range p.children {
		if !c.exited() {
			c.cmd.Process.Signal(syscall.SIGQUIT)
		}
	}
	grace := time.After(10 * time.Second)
	for _, c := range p.children {
		select {
		case <-c.done:
		case <-grace:
			c.cmd.Process.Kill()
			<-c.done
		}
		p.t.Logf("%s (%v) output:\n%s", c.name, c.err, c.log.String())
	}
	p.t.Fatalf(format, a...)
}

// await polls cond until it holds, checking meanwhile that none of alive
// has exited; past the watchdog it fails the test.
func (p *procs) await(what string, alive []*proc, cond func() (bool, error)) {
	p.t.Helper()
	deadline := time.Now().Add(Watchdog)
	for {
		ok, err := cond()
		if err != nil {
			p.fatal("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		for _, c := range alive {
			if c.exited() {
				p.fatal("waiting for %s: %s exited: %v", what, c.name, c.err)
			}
		}
		if time.Now().After(deadline) {
			p.fatal("%s: not after %v", what, Watchdog)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopAll writes the stop file the children wait for, waits for those of
// alive to exit, and fails the test for each that failed, logging what
// each survived.
func (p *procs) stopAll(stopPath string, alive []*proc) {
	p.t.Helper()
	if err := os.WriteFile(stopPath, nil, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.await("the workers to exit", nil, func() (bool, error) {
		for _, c := range alive {
			if !c.exited() {
				return false, nil
			}
		}
		return true, nil
	})
	for _, c := range alive {
		if c.err != nil {
			p.t.Errorf("%s failed: %v\n%s", c.name, c.err, c.log.String())
		}
		if notes, err := os.ReadFile(c.out + ".errors"); err == nil {
			p.t.Logf("%s survived:\n%s", c.name, notes)
		}
	}
}

// readLines returns the complete lines of a child's output file (a line a
// killed child was writing may be cut short; it is left out).
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	return lines[:len(lines)-1], nil
}

// countLines counts the lines of path that start with prefix.
func countLines(path, prefix string) (int, error) {
	lines, err := readLines(path)
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n, err
}
