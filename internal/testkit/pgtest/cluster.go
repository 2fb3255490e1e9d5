package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clusterConf follows localConf in a private cluster's postgresql.conf (a
// later line wins). An immediate shutdown loses what a backend has not yet
// written to the operating system, and with synchronous_commit off that
// includes commits already acknowledged; a test that crashes its server
// and then counts acknowledged writes needs them written at commit. fsync
// may stay off: the operating system does not crash.
const clusterConf = `
# Added by cairnq internal/pgtest: a private cluster a test crashes.
synchronous_commit = on
max_connections = 100
`

// Cluster is a PostgreSQL server of one test's own, made from the local
// binaries, which the test may crash and restart. The shared server of
// [DSN] must never suffer that: other tests run on it in parallel.
type Cluster struct {
	binDir  string
	dir     string // the temp dir holding the data dir and the log
	dataDir string
	logPath string
	port    int
	as      *runAs
	env     []string
	dsn     string // the cluster's one test database, "cairnq"

	mu   sync.Mutex
	proc *proc // the running postmaster; nil while stopped
}

// NewCluster makes and starts a private cluster for t, on 127.0.0.1 and a
// free port, stopped and removed when t ends; conf lines (such as
// "wal_writer_delay = 10s") are added to its postgresql.conf. It needs the
// local initdb, postgres and pg_ctl; without them t is skipped, or fails
// when CAIRNQ_REQUIRE_PG is set.
func NewCluster(t testing.TB, conf ...string) *Cluster {
	t.Helper()
	binDir, err := findLocalBin()
	if err != nil {
		fail, msg := unavailableVerdict(os.Getenv, []string{"a private cluster needs the local binaries: " + err.Error()}, false)
		if fail {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), localStartTimeout)
	defer cancel()
	c, err := startCluster(ctx, binDir, conf)
	if err != nil {
		t.Fatalf("pgtest: private cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Errorf("pgtest: stopping the private cluster: %v", err)
		}
	})
	t.Logf("pgtest: private cluster %s on 127.0.0.1:%d%s", c.dataDir, c.port, asWho(c.as))
	return c
}

// DSN returns the DSN of the cluster's test database, whose role is a
// superuser.
func (c *Cluster) DSN() string { return c.dsn }

// RestartImmediate crashes the server the way `pg_ctl restart -m
// immediate` does and starts it again on the same port and data
// directory: `pg_ctl stop -m immediate` (SIGQUIT: every backend quits at
// once, nothing is checkpointed, open transactions are lost and the next
// start runs crash recovery), then postgres is started anew by this
// process. pg_ctl's own restart would start the server detached from the
// test, where it could outlive a test binary that dies; started here it
// is stopped by the kernel with the binary. It returns once the server
// accepts sessions again, or ctx ends.
func (c *Cluster) RestartImmediate(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("the cluster is stopped")
	}
	stop := exec.CommandContext(ctx, filepath.Join(c.binDir, "pg_ctl"), "stop", "-D", c.dataDir, "-m", "immediate", "-w", "-t", "30")
	stop.Dir = c.dir
	stop.Env = c.env
	stop.SysProcAttr = &syscall.SysProcAttr{Credential: c.as.credential()}
	out, err := stop.CombinedOutput()
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		// No pg_ctl beside postgres: send what it would, SIGQUIT.
		err = c.proc.cmd.Process.Signal(syscall.SIGQUIT)
	}
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %w: %s", err, out)
	}
	select {
	case <-c.proc.done:
	case <-ctx.Done():
		return fmt.Errorf("postgres still running after an immediate stop: %w", ctx.Err())
	}
	c.proc = nil
	return c.start(ctx)
}

// LogTail returns the last n lines of the server's log, for a failing
// test to show.
func (c *Cluster) LogTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return err.Error()
	}
	return tail(b, n)
}

// startCluster makes a cluster in a fresh temp dir and starts it.
func startCluster(ctx context.Context, binDir string, extra []string) (_ *Cluster, err error) {
	as, err := clusterUser(ctx)
	if err != nil {
		return nil, err
	}
	base := tempBase(as)
	sweepStale(base, time.Now().Add(-staleAge))
	dir, err := os.MkdirTemp(base, tempPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{binDir: binDir, dir: dir, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log"), as: as}
	defer func() {
		if err != nil {
			_ = c.stop()
		}
	}()
	if as != nil {
		if err := os.Chown(dir, int(as.uid), int(as.gid)); err != nil {
			return nil, err
		}
	}
	c.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LC_ALL=C", "LANG=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		c.env = append(c.env, "TZ="+tz)
	}
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"--pgdata="+c.dataDir, "--username=postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = c.env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: as.credential()}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb%s: %w\n%s", asWho(as), err, tail(out, 30))
	}
	conf, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = conf.WriteString(localConf + clusterConf + strings.Join(extra, "\n") + "\n")
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// The free port can be taken between the probe and postgres' bind.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		err = c.start(ctx)
		if err == nil {
			break
		}
		if attempt == 3 {
			return nil, fmt.Errorf("%w; tail of the server log:\n%s", err, c.LogTail(30))
		}
	}
	admin := c.url("postgres")
	srv := &server{adminDSN: admin}
	if err := srv.createDatabase(ctx, "cairnq"); err != nil {
		return nil, fmt.Errorf("create the test database: %w", err)
	}
	c.dsn = c.url("cairnq")
	return c, nil
}

func (c *Cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// start starts postgres on c's data dir and port and waits until it
// accepts sessions. The caller holds c.mu or owns c alone.
func (c *Cluster) start(ctx context.Context) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), "-D", c.dataDir, "-p", strconv.Itoa(c.port))
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.as.credential(),
		Pdeathsig:  syscall.SIGQUIT, // see startLocal
	}
	p, err := startProc(cmd)
	_ = logFile.Close()
	if err != nil {
		return fmt.Errorf("start postgres%s: %w", asWho(c.as), err)
	}
	if err := waitReady(ctx, c.url("postgres"), p.done); err != nil {
		_ = p.stop()
		return fmt.Errorf("postgres%s did not start: %w", asWho(c.as), err)
	}
	c.proc = p
	return nil
}

// stop stops the server (a fast shutdown: the test is over, its sessions
// need not end politely) and removes the temp dir.
func (c *Cluster) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.proc != nil {
		select {
		case <-c.proc.done:
		default:
			_ = c.proc.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.proc.done:
			case <-time.After(stopFastWait):
				err = c.proc.stop()
			}
		}
		c.proc = nil
	}
	if rerr := os.RemoveAll(c.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
