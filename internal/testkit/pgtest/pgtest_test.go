package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryOne[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

const userTablesSQL = `SELECT count(*) FROM pg_catalog.pg_tables
	WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`

func TestDSNGivesWorkingEmptyDatabase(t *testing.T) {
	conn := connect(t, DSN(t))
	if got := queryOne[int](t, conn, "SELECT 1"); got != 1 {
		t.Fatalf("select 1 = %d", got)
	}
	if n := queryOne[int64](t, conn, userTablesSQL); n != 0 {
		t.Fatalf("fresh database has %d tables", n)
	}
	if db := queryOne[string](t, conn, "SELECT current_database()"); !strings.HasPrefix(db, "cairnq_") {
		t.Fatalf("current_database() = %q, want a pgtest database", db)
	}
}

func TestDSNDatabasesAreIsolated(t *testing.T) {
	a, b := connect(t, DSN(t)), connect(t, DSN(t))
	dbA := queryOne[string](t, a, "SELECT current_database()")
	dbB := queryOne[string](t, b, "SELECT current_database()")
	if dbA == dbB {
		t.Fatalf("two DSN calls gave the same database %q", dbA)
	}
	if _, err := a.Exec(context.Background(), "CREATE TABLE only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	if n := queryOne[int64](t, a, userTablesSQL); n != 1 {
		t.Fatalf("database A has %d tables, want 1", n)
	}
	if n := queryOne[int64](t, b, userTablesSQL); n != 0 {
		t.Fatalf("database B sees %d tables, want 0", n)
	}
	if _, err := b.Exec(context.Background(), "SELECT * FROM only_in_a"); err == nil {
		t.Fatal("database B can query A's table")
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("user", func(t *testing.T) {
		conn := connect(t, DSN(t))
		name = queryOne[string](t, conn, "SELECT current_database()")
		// Leave the session open: the drop must not wait for it.
	})
	if name == "" {
		t.Fatal("subtest did not run")
	}
	admin := connect(t, AdminDSN(t))
	if n := queryOne[int64](t, admin, "SELECT count(*) FROM pg_database WHERE datname = $1", name); n != 0 {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestAdminDSNIsMaintenanceDatabase(t *testing.T) {
	admin := connect(t, AdminDSN(t))
	if n := queryOne[int64](t, admin, "SELECT count(*) FROM pg_stat_activity"); n < 1 {
		t.Fatalf("pg_stat_activity has %d rows", n)
	}
	dsn := DSN(t)
	conn := connect(t, dsn)
	pid := queryOne[int32](t, conn, "SELECT pg_backend_pid()")
	if !queryOne[bool](t, admin, "SELECT pg_terminate_backend($1)", pid) {
		t.Fatal("pg_terminate_backend from the admin DSN returned false")
	}
}

func TestServerRunsAsNonRoot(t *testing.T) {
	srv := acquire(t)
	if srv.source != sourceLocal {
		t.Skipf("server is %s, not a local cluster", srv.describe)
	}
	admin := connect(t, AdminDSN(t))
	dataDir := queryOne[string](t, admin, "SELECT current_setting('data_directory')")
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Sys().(*syscall.Stat_t).Uid
	procUID := processUID(t, srv.pid)
	t.Logf("data dir %s owned by uid %d; postmaster pid %d runs as uid %d", dataDir, owner, srv.pid, procUID)
	if procUID != owner {
		t.Fatalf("postmaster uid %d differs from data dir owner %d", procUID, owner)
	}
	if procUID == 0 {
		t.Fatal("postgres runs as root")
	}
	if os.Geteuid() != 0 && procUID != uint32(os.Geteuid()) {
		t.Fatalf("not root, yet postgres runs as uid %d rather than ours (%d)", procUID, os.Geteuid())
	}
}

// processUID reads the real uid of pid from /proc.
func processUID(t *testing.T, pid int) uint32 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(uid)
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return 0
}

// That the server is gone after the test binary ends is not tested here:
// it needs a second process to watch this one end. Main stops the server
// after m.Run, and Pdeathsig covers a binary that dies without Main.

func TestParallelDSN(t *testing.T) {
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, DSN(t))
			if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// env is a fake getenv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

func TestChoose(t *testing.T) {
	dockerUp := func(context.Context) error { return nil }
	dockerDown := func(context.Context) error { return errors.New("no docker host") }
	dockerMustNotRun := func(context.Context) error {
		t.Error("docker probed although the DSN was set")
		return nil
	}
	binFound := func() (string, error) { return "/opt/pg/bin", nil }
	binMissing := func() (string, error) { return "", errors.New("initdb not found") }

	cases := []struct {
		name   string
		p      probes
		want   source
		wantIn []string
	}{
		{"env wins", probes{getenv: env{EnvDSN: "postgres://x@h/db"}.get, docker: dockerMustNotRun, localBin: binFound}, sourceEnv, nil},
		{"docker next", probes{getenv: env{}.get, docker: dockerUp, localBin: binFound}, sourceDocker, nil},
		{"blank env ignored", probes{getenv: env{EnvDSN: "  "}.get, docker: dockerUp, localBin: binFound}, sourceDocker, nil},
		{"local last", probes{getenv: env{}.get, docker: dockerDown, localBin: binFound}, sourceLocal, []string{"no docker host"}},
		{"nothing", probes{getenv: env{}.get, docker: dockerDown, localBin: binMissing}, sourceNone, []string{"no docker host", "initdb not found"}},
		// The root module's tests: the Docker path is not linked in.
		{"docker not linked", probes{getenv: env{}.get, localBin: binFound}, sourceLocal, nil},
		{"docker not linked, nothing", probes{getenv: env{}.get, localBin: binMissing}, sourceNone, []string{"initdb not found"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := choose(context.Background(), c.p)
			if pl.source != c.want {
				t.Fatalf("source = %v, want %v", pl.source, c.want)
			}
			why := strings.Join(pl.why, "; ")
			for _, w := range c.wantIn {
				if !strings.Contains(why, w) {
					t.Errorf("why %q lacks %q", why, w)
				}
			}
			if c.want == sourceLocal && pl.binDir != "/opt/pg/bin" {
				t.Errorf("binDir = %q", pl.binDir)
			}
			if c.p.docker == nil && strings.Contains(why, "docker") {
				t.Errorf("why %q mentions docker, which is not linked in", why)
			}
		})
	}
}

func TestUnavailableVerdict(t *testing.T) {
	why := []string{"docker: no docker host", "local binaries: initdb not found"}
	cases := []struct {
		require  string
		set      bool
		wantFail bool
	}{
		{set: false, wantFail: false},
		{require: "", set: true, wantFail: false},
		{require: "0", set: true, wantFail: false},
		{require: "false", set: true, wantFail: false},
		{require: "1", set: true, wantFail: true},
		{require: "true", set: true, wantFail: true},
		{require: "yes", set: true, wantFail: true}, // unparsable: never lets CI skip
	}
	for _, c := range cases {
		for _, docker := range []bool{true, false} {
			e := env{}
			if c.set {
				e[EnvRequire] = c.require
			}
			fail, msg := unavailableVerdict(e.get, why, docker)
			if fail != c.wantFail {
				t.Errorf("%s=%q (set %v): fail = %v, want %v", EnvRequire, c.require, c.set, fail, c.wantFail)
			}
			for _, w := range []string{EnvDSN, "install PostgreSQL", "initdb not found"} {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			// Running Docker helps only a binary that links the Docker path.
			if docker != strings.Contains(msg, "run a Docker engine") {
				t.Errorf("docker linked %v, message %q", docker, msg)
			}
			if fail != strings.Contains(msg, EnvRequire) {
				t.Errorf("message %q should mention %s exactly when failing", msg, EnvRequire)
			}
		}
	}
}

func TestNothingAvailableSkipsUnlessRequired(t *testing.T) {
	nothing := probes{
		getenv:   env{}.get,
		docker:   func(context.Context) error { return errors.New("no docker host") },
		localBin: func() (string, error) { return "", errors.New("initdb not found") },
	}
	out := provision(context.Background(), nothing)
	if out.srv != nil || out.err != nil {
		t.Fatalf("provision with nothing available = %+v, want neither server nor error", out)
	}
	if fail, _ := unavailableVerdict(env{}.get, out.why, true); fail {
		t.Fatal("with CAIRNQ_REQUIRE_PG unset, nothing available must skip")
	}
	if fail, _ := unavailableVerdict(env{EnvRequire: "1"}.get, out.why, true); !fail {
		t.Fatal("with CAIRNQ_REQUIRE_PG=1, nothing available must fail")
	}
}

func TestEnvDSNPath(t *testing.T) {
	admin := AdminDSN(t) // a real server to point the variable at
	pr := probes{
		getenv:   env{EnvDSN: admin}.get,
		docker:   func(context.Context) error { t.Error("docker probed"); return nil },
		localBin: func() (string, error) { t.Error("local binaries looked up"); return "", nil },
	}
	out := provision(context.Background(), pr)
	if out.err != nil || out.srv == nil {
		t.Fatalf("provision from %s: %+v", EnvDSN, out)
	}
	if out.srv.source != sourceEnv || out.srv.stop != nil {
		t.Fatalf("server = %+v, want an external one pgtest does not stop", out.srv)
	}
	var name string
	t.Run("db", func(t *testing.T) {
		dsn, err := createDatabase(t, out.srv)
		if err != nil {
			t.Fatal(err)
		}
		name = queryOne[string](t, connect(t, dsn), "SELECT current_database()")
	})
	conn := connect(t, admin)
	if n := queryOne[int64](t, conn, "SELECT count(*) FROM pg_database WHERE datname = $1", name); n != 0 {
		t.Fatalf("database %s not dropped", name)
	}
}

func TestEnvDSNUnreachableFailsEveryCaller(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	pr := probes{
		getenv:   env{EnvDSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)}.get,
		docker:   func(context.Context) error { return nil },
		localBin: func() (string, error) { return "", nil },
	}
	var p provisioner
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = p.get(pr).err })
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), EnvDSN) {
			t.Errorf("caller %d: err = %v, want the %s error", i, err, EnvDSN)
		}
	}
	if err := p.shutdown(); err != nil {
		t.Fatal(err)
	}
	if p.get(pr).err == nil {
		t.Fatal("get after shutdown should fail")
	}
}

func TestDatabaseName(t *testing.T) {
	long := strings.Repeat("TestSomething/with spaces & Ünïcode-", 5)
	a, b := databaseName(long), databaseName(long)
	if a == b {
		t.Fatalf("two names for one test are equal: %s", a)
	}
	for _, n := range []string{a, b, databaseName("")} {
		if len(n) > 63 {
			t.Errorf("%s is longer than 63 bytes", n)
		}
		for _, r := range n {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
				t.Errorf("%s has %q", n, r)
			}
		}
	}
}

func TestFindLocalBin(t *testing.T) {
	dir, err := findLocalBin()
	if err != nil {
		t.Skipf("no local binaries: %v", err)
	}
	if !hasPGBinaries(dir) {
		t.Fatalf("%s lacks initdb or postgres", dir)
	}
}

// The root module's test binaries do not link the Docker path
// (conformance/pgdocker, a module of its own), so they never probe for
// Docker.
func TestDockerNotLinked(t *testing.T) {
	if registeredDocker() != nil {
		t.Fatal("a Docker path is registered in a root module test binary")
	}
	if p := machineProbes(); p.docker != nil || p.startDocker != nil {
		t.Fatal("machineProbes probes for Docker although none is linked in")
	}
}

// UseDocker puts the registered funcs behind the probe's guard and the
// start's readiness check.
func TestUseDocker(t *testing.T) {
	dockerMu.Lock()
	saved := dockerReg
	dockerMu.Unlock()
	t.Cleanup(func() {
		dockerMu.Lock()
		dockerReg = saved
		dockerMu.Unlock()
	})
	defer func() {
		if recover() == nil {
			t.Error("UseDocker(nil, nil) did not panic")
		}
	}()
	UseDocker(func(context.Context) error { panic("boom") },
		func(context.Context) (DockerServer, error) { return DockerServer{}, errors.New("no container") })
	p := machineProbes()
	if p.docker == nil || p.startDocker == nil {
		t.Fatal("machineProbes ignores the registered Docker path")
	}
	if err := p.docker(context.Background()); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("a panicking probe gave %v", err)
	}
	if _, err := p.startDocker(context.Background()); err == nil || !strings.Contains(err.Error(), "no container") {
		t.Errorf("a failing start gave %v", err)
	}
	UseDocker(nil, nil)
}

func TestGuardProbe(t *testing.T) {
	ok := guardProbe(func(context.Context) error { return nil }, time.Second)
	if err := ok(context.Background()); err != nil {
		t.Errorf("answering probe: %v", err)
	}
	down := guardProbe(func(context.Context) error { return errors.New("no docker host") }, time.Second)
	if err := down(context.Background()); err == nil || !strings.Contains(err.Error(), "no docker host") {
		t.Errorf("failing probe: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	hung := guardProbe(func(context.Context) error { <-release; return nil }, 50*time.Millisecond)
	start := time.Now()
	if err := hung(context.Background()); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("probe ignoring its context: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("guard waited %v for a hung probe", d)
	}
	panicky := guardProbe(func(context.Context) error { panic("docker client") }, time.Second)
	if err := panicky(context.Background()); err == nil || !strings.Contains(err.Error(), "docker client") {
		t.Errorf("panicking probe: %v", err)
	}
}

// dockerStarter hands back the container the start func ran once a session
// works on it, and removes it when none does.
func TestDockerStarter(t *testing.T) {
	admin := AdminDSN(t) // a real server to play the container
	stops := 0
	srv, err := dockerStarter(func(context.Context) (DockerServer, error) {
		return DockerServer{AdminDSN: admin, Describe: "fake container", Stop: func() error { stops++; return nil }}, nil
	})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if srv.source != sourceDocker || srv.adminDSN != admin || srv.describe != "fake container" || srv.stop == nil {
		t.Fatalf("server = %+v", srv)
	}
	if err := srv.stop(); err != nil || stops != 1 {
		t.Fatalf("stop: %v, %d calls", err, stops)
	}
	_, err = dockerStarter(func(context.Context) (DockerServer, error) {
		return DockerServer{Stop: func() error { stops++; return nil }}, nil
	})(context.Background())
	if err == nil || stops != 2 {
		t.Fatalf("start with no DSN: err %v, %d stops; want an error and the container removed", err, stops)
	}
}

// A Docker engine that answers but cannot run the container falls back to
// the local binaries, and reports both failures when those are missing too.
func TestDockerStartFailureFallsBack(t *testing.T) {
	pr := probes{
		getenv:      env{}.get,
		docker:      func(context.Context) error { return nil },
		startDocker: func(context.Context) (*server, error) { return nil, errors.New("image pull denied") },
		localBin:    func() (string, error) { return "", errors.New("initdb not found") },
	}
	out := provision(context.Background(), pr)
	if out.srv != nil || out.err == nil {
		t.Fatalf("provision = %+v, want an error", out)
	}
	for _, w := range []string{"image pull denied", "initdb not found"} {
		if !strings.Contains(out.err.Error(), w) {
			t.Errorf("error %q lacks %q", out.err, w)
		}
	}
}

// TestStartupFailureShowsLogTail runs startLocal on fake binaries whose
// postgres fails, and checks the error carries the server log's tail and the
// temp dir is removed.
func TestStartupFailureShowsLogTail(t *testing.T) {
	// Not t.TempDir: as root the fake binaries run as the unprivileged user,
	// who must reach them, and t.TempDir's parent is private.
	bin, err := os.MkdirTemp("", "pgtest-fakebin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	const marker = "FATAL:  fake startup failure 7c1e"
	scripts := map[string]string{
		"initdb": `#!/bin/sh
for a in "$@"; do case "$a" in --pgdata=*) d="${a#--pgdata=}";; esac; done
mkdir -p "$d" && touch "$d/postgresql.conf"
`,
		"postgres": "#!/bin/sh\necho 'LOG:  starting fake'\necho '" + marker + "' >&2\nexit 1\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err = startLocal(context.Background(), bin)
	if err == nil {
		t.Fatal("startLocal with a failing postgres succeeded")
	}
	if !strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "starting fake") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
	i := strings.Index(err.Error(), "tail of ")
	if i < 0 {
		t.Fatalf("error names no log file: %v", err)
	}
	logPath := strings.Fields(err.Error()[i+len("tail of "):])[0]
	logPath = strings.TrimSuffix(logPath, ":")
	if _, serr := os.Stat(filepath.Dir(logPath)); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("temp dir %s left behind (stat: %v)", filepath.Dir(logPath), serr)
	}
}

func TestSweepStale(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, age time.Duration, pidFile string) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if pidFile != "" {
			if err := os.WriteFile(filepath.Join(d, "data", "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dead := mk(tempPrefix+"dead", time.Hour, "")
	live := mk(tempPrefix+"live", time.Hour, strconv.Itoa(os.Getpid())+"\n/x\n")
	young := mk(tempPrefix+"young", time.Minute, "")
	other := mk("not-ours", time.Hour, "")
	sweepStale(base, time.Now().Add(-staleAge))
	for d, wantGone := range map[string]bool{dead: true, live: false, young: false, other: false} {
		_, err := os.Stat(d)
		if gone := errors.Is(err, os.ErrNotExist); gone != wantGone {
			t.Errorf("%s: gone = %v, want %v", filepath.Base(d), gone, wantGone)
		}
	}
}
