package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// unprivilegedUserName is the user the local cluster runs as when the test
// binary runs as root; it is created (as a system user without a home) when
// missing.
const unprivilegedUserName = "cairnq-pg"

// Local server tuning: durability off, for speed.
const localConf = `
# Added by cairnq internal/pgtest: a throwaway cluster, durability off.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
logging_collector = off
`

// Stop escalation of the local server: SIGTERM (smart shutdown), then
// SIGINT (fast shutdown, ends sessions), then SIGKILL.
const (
	stopSmartWait = 3 * time.Second
	stopFastWait  = 5 * time.Second
	stopKillWait  = 5 * time.Second
)

// findLocalBin returns a directory holding both initdb and postgres: the
// one of initdb on PATH (symlinks resolved), else the newest
// /usr/lib/postgresql/*/bin.
func findLocalBin() (string, error) {
	var tried []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs := []string{filepath.Dir(p)}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append([]string{filepath.Dir(real)}, dirs...)
		}
		for _, d := range dirs {
			if hasPGBinaries(d) {
				return d, nil
			}
			tried = append(tried, d)
		}
	} else {
		tried = append(tried, "PATH")
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return pgDirVersion(matches[i]) > pgDirVersion(matches[j]) })
	for _, d := range matches {
		if hasPGBinaries(d) {
			return d, nil
		}
		tried = append(tried, d)
	}
	if len(matches) == 0 {
		tried = append(tried, "/usr/lib/postgresql/*/bin")
	}
	return "", fmt.Errorf("initdb and postgres not found (looked in %s)", strings.Join(tried, ", "))
}

// pgDirVersion is the major version in /usr/lib/postgresql/<v>/bin.
func pgDirVersion(dir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	return v
}

func hasPGBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// runAs is the identity the cluster's processes run as; nil means the
// test binary's own.
type runAs struct {
	name     string
	uid, gid uint32
}

func (r *runAs) credential() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: r.uid, Gid: r.gid, Groups: []uint32{}}
}

// clusterUser returns nil when not root, and otherwise an unprivileged user:
// cairnq-pg (created if missing), else postgres, else nobody.
func clusterUser(ctx context.Context) (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if r, err := lookupUser(unprivilegedUserName); err == nil {
		return r, nil
	}
	var createErr error
	for attempt := range 5 {
		// Concurrent test binaries may race here: useradd then fails with
		// "already exists" or a passwd lock error, and the lookup succeeds.
		out, err := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home",
			"--user-group", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
			unprivilegedUserName).CombinedOutput()
		if r, lerr := lookupUser(unprivilegedUserName); lerr == nil {
			return r, nil
		}
		createErr = fmt.Errorf("useradd: %v: %s", err, bytes.TrimSpace(out))
		if errors.Is(err, exec.ErrNotFound) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	for _, name := range []string{"postgres", "nobody"} {
		if r, err := lookupUser(name); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("running as root and no unprivileged user to run postgres as (%v)", createErr)
}

func lookupUser(name string) (*runAs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s is root", name)
	}
	return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// tempBase is where the cluster's temp dir goes: os.TempDir(), unless the
// cluster user could not reach it (e.g. TMPDIR under /root), then /tmp.
func tempBase(as *runAs) string {
	base := os.TempDir()
	if as == nil || reachable(base, as) {
		return base
	}
	return "/tmp"
}

// reachable reports whether every directory from / to dir can be searched
// by as.
func reachable(dir string, as *runAs) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return false
		}
		perm := st.Mode().Perm()
		ok := perm&0o001 != 0
		if sys, isStat := st.Sys().(*syscall.Stat_t); isStat {
			ok = ok || (sys.Uid == as.uid && perm&0o100 != 0) || (sys.Gid == as.gid && perm&0o010 != 0)
		}
		if !ok {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// tempPrefix names the clusters' temp dirs.
const tempPrefix = "cairnq-pgtest-"

// staleAge is how old a cluster temp dir with no live postmaster must be
// before sweepStale removes it.
const staleAge = 15 * time.Minute

// sweepStale removes cluster temp dirs left under base by test binaries that
// died without cleaning up (panic, timeout, kill): those last changed before
// cutoff whose postmaster is not running. Errors are ignored: sweeping is a
// courtesy, and a younger dir may belong to a binary still starting up.
func sweepStale(base string, cutoff time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() || st.ModTime().After(cutoff) {
			continue
		}
		if postmasterAlive(filepath.Join(d, "data")) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// postmasterAlive reports whether dataDir's postmaster.pid names a running
// process.
func postmasterAlive(dataDir string) bool {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unreadable: assume alive
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return false
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// startLocal makes and starts a throwaway cluster with the binaries in
// binDir, in a fresh temp dir (a leftover data dir is never reused).
func startLocal(ctx context.Context, binDir string) (_ *server, err error) {
	ctx, cancel := context.WithTimeout(ctx, localStartTimeout)
	defer cancel()
	as, err := clusterUser(ctx)
	if err != nil {
		return nil, err
	}
	base := tempBase(as)
	sweepStale(base, time.Now().Add(-staleAge))
	dir, err := ownedTempDir(base, tempPrefix, as)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	lc := &localCluster{
		binDir:  binDir,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "postgres.log"),
		env:     localEnv(dir),
		as:      as,
	}
	if err := lc.initdb(ctx); err != nil {
		return nil, err
	}
	return lc.start(ctx)
}

// localCluster is where a throwaway cluster lives and how its processes
// run: the binaries, the temp dir holding its data dir and server log,
// their environment, and the user they run as.
type localCluster struct {
	binDir  string
	dir     string
	dataDir string
	logPath string
	env     []string
	as      *runAs
}

// localEnv is the environment of the cluster's processes: PATH, a HOME in
// dir, the C locale, and TZ when set.
func localEnv(dir string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LC_ALL=C", "LANG=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}

// initdb makes the data dir and appends localConf to its postgresql.conf.
func (lc *localCluster) initdb(ctx context.Context) error {
	initdb := exec.CommandContext(ctx, filepath.Join(lc.binDir, "initdb"),
		"--pgdata="+lc.dataDir, "--username=postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.Dir = lc.dir // a cwd the cluster user can read (initdb needs one)
	initdb.Env = lc.env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: lc.as.credential()}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb%s: %w\n%s", asWho(lc.as), err, tail(out, 30))
	}
	conf, err := os.OpenFile(filepath.Join(lc.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = conf.WriteString(localConf)
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	return err
}

// start starts postgres on a free port and waits until it takes sessions.
func (lc *localCluster) start(ctx context.Context) (*server, error) {
	// The free port can be taken between our probe and postgres' bind:
	// retry with another one then.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := lc.startPostgres(port)
		if err != nil {
			return nil, err
		}
		adminDSN := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = waitReady(ctx, adminDSN, p.done)
		if err == nil {
			return lc.runningServer(p, port, adminDSN), nil
		}
		_ = p.stop()
		log, _ := os.ReadFile(lc.logPath)
		if attempt < attempts && bytes.Contains(log, []byte("could not bind")) {
			continue
		}
		return nil, fmt.Errorf("postgres%s did not start: %w; tail of %s (temp dir since removed):\n%s", asWho(lc.as), err, lc.logPath, tail(log, 30))
	}
}

// startPostgres starts the postgres process on port, its output appended
// to the server log.
func (lc *localCluster) startPostgres(port int) (*proc, error) {
	logFile, err := os.OpenFile(lc.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(lc.binDir, "postgres"), "-D", lc.dataDir, "-p", strconv.Itoa(port))
	cmd.Dir = lc.dir
	cmd.Env = lc.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: lc.as.credential(),
		// Should the test binary die without pgtest.Main's cleanup
		// (panic, timeout, kill), the kernel stops the server.
		Pdeathsig: syscall.SIGQUIT,
	}
	p, err := startProc(cmd)
	_ = logFile.Close() // the child has its own copy
	if err != nil {
		return nil, fmt.Errorf("start postgres%s: %w", asWho(lc.as), err)
	}
	return p, nil
}

// runningServer is the started cluster as a server, whose stop ends the
// sessions tests left open, stops p and removes the temp dir.
func (lc *localCluster) runningServer(p *proc, port int, adminDSN string) *server {
	srv := &server{
		source:   sourceLocal,
		adminDSN: adminDSN,
		describe: fmt.Sprintf("local cluster %s on 127.0.0.1:%d%s", lc.dataDir, port, asWho(lc.as)),
		dataDir:  lc.dataDir,
		pid:      p.cmd.Process.Pid,
	}
	srv.stop = func() error {
		// Sessions a test left open would hold up a smart shutdown.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "+
			"WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")
		cancel()
		serr := p.stop()
		if rerr := os.RemoveAll(lc.dir); rerr != nil && serr == nil {
			serr = rerr
		}
		return serr
	}
	return srv
}

// ownedTempDir makes a temporary directory under base, owned by as (the
// process's own user when as is nil), for a server process run as as.
func ownedTempDir(base, prefix string, as *runAs) (string, error) {
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", err
	}
	if as != nil {
		if err := os.Chown(dir, int(as.uid), int(as.gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

func asWho(as *runAs) string {
	if as == nil {
		return ""
	}
	return fmt.Sprintf(" (as user %s, uid %d)", as.name, as.uid)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls until a session on dsn works, the context ends, or
// exited (when not nil) is closed.
func waitReady(ctx context.Context, dsn string, exited <-chan struct{}) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	var last error
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			_ = conn.Close(context.WithoutCancel(ctx))
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-exited:
			return fmt.Errorf("the server exited during startup (last connection error: %v)", last)
		case <-ctx.Done():
			return fmt.Errorf("not ready in time: %w (last connection error: %v)", ctx.Err(), last)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// proc is a started server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
}

// startProc starts cmd. Pdeathsig is sent when the thread that forked the
// child exits, not the process, so the fork happens on a locked OS thread
// that stays in Wait until the child is gone.
func startProc(cmd *exec.Cmd) (*proc, error) {
	p := &proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// stop shuts the server down: SIGTERM, then SIGINT, then SIGKILL, each
// after a wait, and returns once the process is gone.
func (p *proc) stop() error {
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGTERM, stopSmartWait}, {syscall.SIGINT, stopFastWait}, {syscall.SIGKILL, stopKillWait}}
	for _, s := range steps {
		select {
		case <-p.done:
			return nil
		default:
		}
		if err := p.cmd.Process.Signal(s.sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signal postgres: %w", err)
		}
		select {
		case <-p.done:
			if s.sig != syscall.SIGTERM {
				return fmt.Errorf("postgres needed %v to stop", s.sig)
			}
			return nil
		case <-time.After(s.wait):
		}
	}
	return fmt.Errorf("postgres (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
