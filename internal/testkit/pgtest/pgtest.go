// Package pgtest gives tests a real PostgreSQL server, one per test binary,
// and a fresh empty database per test.
//
// The server is provisioned lazily, the first time a test asks for it, by the
// first of these that is available:
//
//  1. the server named by the CAIRNQ_TEST_PG_DSN environment variable (a DSN
//     whose role may CREATE DATABASE and DROP DATABASE, ideally a superuser);
//  2. a container from testcontainers-go's postgres module, when a Docker
//     engine answers a health check and the test binary links the Docker
//     path, which lives in a module of its own so that the Docker client
//     stays out of the root module's graph (import _
//     "github.com/cairnq/cairnq-go/conformance/pgdocker"; see
//     [UseDocker]);
//  3. a throwaway cluster made with the local initdb and postgres binaries
//     (found on PATH or under /usr/lib/postgresql/*/bin), listening on
//     127.0.0.1 on a free port, run as an unprivileged user when the test
//     binary runs as root, since postgres refuses to run as root.
//
// When none is available the test is skipped with a message saying how to
// enable it, unless CAIRNQ_REQUIRE_PG is set to a true value, in which case
// the test fails, so that CI can never go green by skipping.
//
// A package using pgtest should route its TestMain through [Main], so the
// server it started is stopped when its tests are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

const (
	// EnvDSN names the environment variable holding the DSN of an existing
	// server to test against. Its role must be allowed to create and drop
	// databases (a superuser is simplest). When set, it is always used: an
	// unreachable server fails the tests rather than falling back.
	EnvDSN = "CAIRNQ_TEST_PG_DSN"
	// EnvRequire names the environment variable that, when set to a true
	// value ("1"), turns "no PostgreSQL server available" from a skip into a
	// test failure. Any value other than "" or a false value accepted by
	// strconv.ParseBool counts as true.
	EnvRequire = "CAIRNQ_REQUIRE_PG"
)

// Timeouts of the provisioning steps.
const (
	dockerProbeTimeout = 5 * time.Second
	dockerStartTimeout = 5 * time.Minute // may include an image pull
	localStartTimeout  = 2 * time.Minute
	adminOpTimeout     = 30 * time.Second
)

// source is where the server comes from.
type source int

const (
	sourceNone source = iota
	sourceEnv
	sourceDocker
	sourceLocal
)

func (s source) String() string {
	switch s {
	case sourceEnv:
		return EnvDSN
	case sourceDocker:
		return "docker"
	case sourceLocal:
		return "local binaries"
	default:
		return "none"
	}
}

// probes are the lookups the provisioning decision depends on. Tests replace
// them to exercise the decision without touching the machine.
type probes struct {
	getenv func(string) string
	// docker returns nil when a Docker engine answers; nil when the test
	// binary does not link the Docker path (see UseDocker).
	docker func(context.Context) error
	// startDocker runs the container; set when docker is.
	startDocker func(context.Context) (*server, error)
	// localBin returns the directory holding initdb and postgres.
	localBin func() (string, error)
}

// machineProbes are the real probes.
func machineProbes() probes {
	p := probes{getenv: os.Getenv, localBin: findLocalBin}
	if d := registeredDocker(); d != nil {
		p.docker = guardProbe(d.probe, dockerProbeTimeout)
		p.startDocker = dockerStarter(d.start)
	}
	return p
}

// plan is the outcome of choose: which source to use, and why the sources
// before it were passed over.
type plan struct {
	source source
	dsn    string   // for sourceEnv
	binDir string   // for sourceLocal
	why    []string // one line per source passed over
}

// choose picks the first available source, in the documented order. The
// Docker path is passed over in silence when it is not linked in.
func choose(ctx context.Context, p probes) plan {
	if dsn := strings.TrimSpace(p.getenv(EnvDSN)); dsn != "" {
		return plan{source: sourceEnv, dsn: dsn}
	}
	var why []string
	if p.docker != nil {
		err := p.docker(ctx)
		if err == nil {
			return plan{source: sourceDocker}
		}
		why = append(why, fmt.Sprintf("docker: %v", err))
	}
	dir, err := p.localBin()
	if err == nil {
		return plan{source: sourceLocal, binDir: dir, why: why}
	}
	why = append(why, fmt.Sprintf("local binaries: %v", err))
	return plan{source: sourceNone, why: why}
}

// requirePG reports whether EnvRequire asks for failure instead of skipping.
// An unparsable value counts as true: a typo must not let CI skip.
func requirePG(getenv func(string) string) bool {
	v := strings.TrimSpace(getenv(EnvRequire))
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// unavailableVerdict decides what a test does when no server can be had:
// fail is true when EnvRequire is set, and msg says how to enable the tests
// (running a Docker engine only when the binary links the Docker path).
func unavailableVerdict(getenv func(string) string, why []string, docker bool) (fail bool, msg string) {
	var b strings.Builder
	b.WriteString("pgtest: no PostgreSQL server available")
	if len(why) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(why, "; "))
		b.WriteString(")")
	}
	b.WriteString(". To run these tests, set " + EnvDSN +
		" to the DSN of a server whose role may create databases, or install PostgreSQL" +
		" (initdb and postgres on PATH or under /usr/lib/postgresql/*/bin, e.g. apt-get install postgresql)")
	if docker {
		b.WriteString(", or run a Docker engine")
	}
	b.WriteString(".")
	fail = requirePG(getenv)
	if fail {
		b.WriteString(" " + EnvRequire + " is set, so this is a failure, not a skip.")
	}
	return fail, b.String()
}

// outcome is the result of provisioning, shared by every caller.
type outcome struct {
	srv *server
	// err is set when a server was available but could not be started or
	// reached: every caller fails with it.
	err error
	// why is set (with srv and err nil) when no server is available.
	why []string
}

// provision chooses a source and starts or checks the server. A Docker
// engine that answers but cannot run the container falls back to the local
// binaries; the Docker error is reported if that fails too.
func provision(ctx context.Context, p probes) outcome {
	pl := choose(ctx, p)
	switch pl.source {
	case sourceEnv:
		srv, err := externalServer(ctx, pl.dsn)
		return outcome{srv: srv, err: err}
	case sourceDocker:
		srv, err := p.startDocker(ctx)
		if err == nil {
			return outcome{srv: srv}
		}
		dir, lerr := p.localBin()
		if lerr != nil {
			return outcome{err: fmt.Errorf("docker engine answers but the postgres container failed: %w (and no local binaries: %v)", err, lerr)}
		}
		srv, lerr = startLocal(ctx, dir)
		if lerr != nil {
			return outcome{err: errors.Join(fmt.Errorf("docker: %w", err), fmt.Errorf("local binaries: %w", lerr))}
		}
		srv.notes = append(srv.notes, fmt.Sprintf("docker container failed: %v", err))
		return outcome{srv: srv}
	case sourceLocal:
		srv, err := startLocal(ctx, pl.binDir)
		if srv != nil {
			srv.notes = append(srv.notes, pl.why...)
		}
		return outcome{srv: srv, err: err}
	default:
		return outcome{why: pl.why}
	}
}

// server is a provisioned PostgreSQL server.
type server struct {
	source   source
	adminDSN string
	// describe says what the server is, for test logs.
	describe string
	// notes says why earlier sources were passed over.
	notes []string
	// stop stops the server and removes what it left; nil when pgtest did
	// not start the server.
	stop func() error

	// For sourceLocal only.
	dataDir string
	pid     int
}

// databaseDSN is the DSN of database name on the server.
func (s *server) databaseDSN(name string) (string, error) {
	return pgdsn.WithDatabase(s.adminDSN, name)
}

// exec runs one statement on the maintenance database.
func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", pgdsn.Redact(s.adminDSN), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// createDatabase creates database name from template1. FILE_COPY (PostgreSQL
// 15+) is about twice as fast as the default WAL_LOG for a small template;
// older servers reject the option and get the default.
func (s *server) createDatabase(ctx context.Context, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	err := s.exec(ctx, "CREATE DATABASE "+ident+" STRATEGY = FILE_COPY")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" {
		err = s.exec(ctx, "CREATE DATABASE "+ident)
	}
	return err
}

// dropDatabase drops database name, terminating its sessions.
func (s *server) dropDatabase(ctx context.Context, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	err := s.exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" {
		// Before PostgreSQL 13 there is no WITH (FORCE).
		if err := s.exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "+
			quoteLiteral(name)); err != nil {
			return err
		}
		err = s.exec(ctx, "DROP DATABASE IF EXISTS "+ident)
	}
	return err
}

// externalServer checks the server named by EnvDSN.
func externalServer(ctx context.Context, dsn string) (*server, error) {
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("%s does not parse: %w", EnvDSN, err)
	}
	if _, err := pgdsn.WithDatabase(dsn, "x"); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDSN, err)
	}
	srv := &server{source: sourceEnv, adminDSN: dsn, describe: "server from " + EnvDSN + " (" + pgdsn.Redact(dsn) + ")"}
	ctx, cancel := context.WithTimeout(ctx, adminOpTimeout)
	defer cancel()
	if err := srv.exec(ctx, "SELECT 1"); err != nil {
		return nil, fmt.Errorf("%s is set but the server does not answer: %w", EnvDSN, err)
	}
	return srv, nil
}

// quoteLiteral quotes v as an SQL string literal.
func quoteLiteral(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// provisioner holds the one server of this test binary.
type provisioner struct {
	mu      sync.Mutex
	done    bool
	out     outcome
	stopped bool
}

// shared is the test binary's provisioner: the server is per process by
// design, so this is the one piece of package-level state.
var shared provisioner

// get provisions the server on first use; every caller gets the same
// outcome, errors included.
func (p *provisioner) get(pr probes) outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return outcome{err: errors.New("the server was already stopped by pgtest.Main")}
	}
	if !p.done {
		p.out = provision(context.Background(), pr)
		p.done = true
	}
	return p.out
}

// shutdown stops the server if this process started one.
func (p *provisioner) shutdown() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if !p.done || p.out.srv == nil || p.out.srv.stop == nil {
		return nil
	}
	stop := p.out.srv.stop
	p.out.srv.stop = nil
	return stop()
}

// Main wraps testing.M for a package's TestMain: it runs the tests and then
// stops the server this package started (if any), so no postgres process
// outlives the test binary. It calls os.Exit with the tests' exit code.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := shared.shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: stopping the PostgreSQL server: %v\n", err)
	}
	os.Exit(code)
}

// acquire returns the binary's server, or skips or fails t.
func acquire(t testing.TB) *server {
	t.Helper()
	pr := machineProbes()
	out := shared.get(pr)
	if out.err != nil {
		t.Fatalf("pgtest: %v", out.err)
	}
	if out.srv == nil {
		fail, msg := unavailableVerdict(os.Getenv, out.why, pr.docker != nil)
		if fail {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return out.srv
}

// DSN returns a connection string to a fresh, empty database created for
// this test (CREATE DATABASE with a unique name), dropped in t.Cleanup
// (WITH (FORCE), so sessions left open do not block it). The DSN's role is a
// superuser on servers pgtest starts. It skips or fails t as described in
// the package documentation when no server can be had.
func DSN(t testing.TB) string {
	t.Helper()
	srv := acquire(t)
	dsn, err := createDatabase(t, srv)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// createDatabase creates a database for t on srv and registers its drop.
func createDatabase(t testing.TB, srv *server) (string, error) {
	t.Helper()
	name := databaseName(t.Name())
	dsn, err := srv.databaseDSN(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminOpTimeout)
	defer cancel()
	if err := srv.createDatabase(ctx, name); err != nil {
		return "", fmt.Errorf("create database %s on %s: %w", name, srv.describe, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminOpTimeout)
		defer cancel()
		if err := srv.dropDatabase(ctx, name); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	t.Logf("pgtest: database %s on %s", name, srv.describe)
	return dsn, nil
}

// AdminDSN returns the DSN of the server's maintenance database (for tests
// that need to e.g. pg_terminate_backend, or inspect pg_database). Its role
// is a superuser on servers pgtest starts, and whatever EnvDSN names
// otherwise. Tests must not drop or alter the maintenance database. It skips
// or fails t as [DSN] does.
func AdminDSN(t testing.TB) string {
	t.Helper()
	return acquire(t).adminDSN
}

// Source names where the test binary's server comes from: "docker", "local
// binaries", or EnvDSN's name. It provisions the server as [DSN] does, and
// skips or fails t as DSN does when none can be had.
func Source(t testing.TB) string {
	t.Helper()
	return acquire(t).source.String()
}

// databaseName makes a unique, valid database name from a test name.
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("cairnq_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var rnd [5]byte
	_, _ = rand.Read(rnd[:]) // never fails on Linux
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}
