package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

// PoolMode is how a connection pooler shares server connections among its
// clients.
type PoolMode string

// The pgbouncer pool modes the tests put in front of the server.
const (
	// PoolTransaction gives a client a server connection for one
	// transaction only (a statement outside one is its own): the way many
	// application instances share one Postgres, and what hosted poolers
	// (Neon's pooled endpoint, Supabase's pooler) run. Session state does
	// not survive from one transaction to the next: prepared statements,
	// LISTEN, SET and startup parameters beyond the few pgbouncer tracks.
	PoolTransaction PoolMode = "transaction"
	// PoolSession gives a client one server connection for as long as it
	// stays connected, so everything session-scoped works.
	PoolSession PoolMode = "session"
)

// poolerStartTimeout bounds starting pgbouncer and its first answer.
const poolerStartTimeout = 30 * time.Second

// Pooler starts Debian's pgbouncer on a free loopback port in front of the
// server dsn names, in mode, and returns dsn rewritten to reach the same
// database through it. The pooler runs until t ends. When the test binary
// runs as root it runs as the cluster's unprivileged user (pgbouncer
// refuses root). Without a pgbouncer binary t is skipped, or fails under
// CAIRNQ_REQUIRE_PG, so that CI cannot pass by skipping.
//
// Its configuration is the usual one of a deployment: authentication
// passed through to the server, extra_float_digits (which lib/pq sends)
// ignored, any other startup parameter refused, and a server pool large
// enough that no client waits behind a session-mode pool.
//
// ignore names further startup parameters the pooler drops instead of
// refusing (pgbouncer's ignore_startup_parameters), as some deployments
// configure search_path: a client then connects, but its setting never
// reaches the server.
func Pooler(t testing.TB, dsn string, mode PoolMode, ignore ...string) string {
	t.Helper()
	bin, err := findPgbouncer()
	if err != nil {
		msg := "pgtest: " + err.Error() + " (Debian: apt-get install pgbouncer)"
		if requirePG(os.Getenv) {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	p, err := startPooler(t, bin, dsn, mode, ignore)
	if err != nil {
		t.Fatalf("pgtest: pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("pgtest: stopping pgbouncer: %v", err)
		}
	})
	t.Logf("pgtest: pgbouncer (%s mode) on %s", mode, p.addr)
	return p.dsn
}

// findPgbouncer returns the pgbouncer binary: the one on PATH, else
// Debian's /usr/sbin/pgbouncer (sbin is not on every PATH).
func findPgbouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", fmt.Errorf("no pgbouncer binary on PATH or at /usr/sbin/pgbouncer")
}

// pooler is a running pgbouncer.
type pooler struct {
	proc *proc
	dir  string
	addr string
	dsn  string
}

func startPooler(t testing.TB, bin, dsn string, mode PoolMode, ignore []string) (_ *pooler, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), poolerStartTimeout)
	defer cancel()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	as, err := clusterUser(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := ownedTempDir(tempBase(as), "cairnq-pgbouncer-", as)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	server := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	if cfg.Password != "" {
		server += " password=" + cfg.Password
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "pgbouncer.ini")
		logPath := filepath.Join(dir, "pgbouncer.log")
		if err := os.WriteFile(conf, []byte(poolerConf(cfg.Database, server, port, mode, logPath, ignore)), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, conf)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as.credential(), Pdeathsig: syscall.SIGKILL}
		p, err := startProc(cmd)
		if err != nil {
			return nil, fmt.Errorf("start %s%s: %w", bin, asWho(as), err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		through, err := pgdsn.WithHostPort(dsn, addr)
		if err != nil {
			_ = p.stop()
			return nil, err
		}
		pl := &pooler{proc: p, dir: dir, addr: addr, dsn: through}
		if err := waitListening(ctx, addr, p.done); err == nil {
			return pl, nil
		}
		_ = p.stop()
		log, _ := os.ReadFile(logPath)
		if attempt < attempts && strings.Contains(string(log), "bind") {
			continue
		}
		return nil, fmt.Errorf("pgbouncer%s did not start: %w; tail of its log:\n%s", asWho(as), err, tail(log, 20))
	}
}

// poolerConf is pgbouncer's configuration for one database.
func poolerConf(db, server string, port int, mode PoolMode, logPath string, ignore []string) string {
	return fmt.Sprintf(`[databases]
%s = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = %s
default_pool_size = 60
max_client_conn = 400
ignore_startup_parameters = %s
server_reset_query =
logfile = %s
`, db, server, port, mode, strings.Join(append([]string{"extra_float_digits"}, ignore...), ","), logPath)
}

// waitListening polls until addr accepts a TCP connection, ctx ends or the
// process exits.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("pgbouncer exited during startup (%v)", err)
		case <-ctx.Done():
			return fmt.Errorf("not listening in time: %w (%v)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop ends pgbouncer (SIGINT: at once, closing its connections) and
// removes its directory.
func (p *pooler) stop() error {
	_ = p.proc.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.proc.done:
	case <-time.After(5 * time.Second):
		_ = p.proc.cmd.Process.Kill()
		<-p.proc.done
	}
	return os.RemoveAll(p.dir)
}
