package pgdocker

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// envRequireDocker names the variable that turns "no Docker engine" from a
// skip of the certification into a failure, for a CI job that runs one.
const envRequireDocker = "CAIRNQ_REQUIRE_DOCKER"

func TestMain(m *testing.M) { pgserver.Main(m) }

// requireDocker reports whether envRequireDocker is set to a true value; an
// unparsable value counts as true, as CAIRNQ_REQUIRE_PG's does.
func requireDocker() bool {
	v := strings.TrimSpace(os.Getenv(envRequireDocker))
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// dockerOrSkip skips t (or fails it, when envRequireDocker is set) unless
// the shared server will come from a Docker container.
func dockerOrSkip(t *testing.T) {
	t.Helper()
	if dsn := strings.TrimSpace(os.Getenv(pgtest.EnvDSN)); dsn != "" {
		t.Skipf("%s is set, so pgtest uses that server and not Docker", pgtest.EnvDSN)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reachable(ctx); err != nil {
		if requireDocker() {
			t.Fatalf("no Docker engine (%v), and %s is set", err, envRequireDocker)
		}
		t.Skipf("no Docker engine: %v (docker/postgres/build.sh starts one and builds the image: see CONTRIBUTING.md; %s=1 makes this a failure)", err, envRequireDocker)
	}
}

// The probe fails fast and never panics where there is no Docker engine.
func TestProbe(t *testing.T) {
	started := time.Now()
	err := reachable(context.Background())
	t.Logf("docker reachable: %v (after %v)", err, time.Since(started))
}

// Linking this package puts the Docker path in front of the local
// binaries; without an engine, provisioning falls back to them.
func TestProvisioning(t *testing.T) {
	source := pgtest.Source(t)
	t.Logf("the server comes from %s", source)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if os.Getenv(pgtest.EnvDSN) == "" && reachable(ctx) == nil && source != "docker" {
		t.Errorf("a Docker engine answers, yet the server comes from %s", source)
	}
}

// The certification (every contract check, then every scenario, embedded
// and from CAIRNQ_SCENARIOS_DIR) of the pgx executor on a server in a
// container.
func TestCertifyOnDocker(t *testing.T) {
	dockerOrSkip(t)
	if source := pgtest.Source(t); source != "docker" {
		t.Fatalf("a Docker engine answers, yet the server comes from %s", source)
	}
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "cairnqpgx on a Docker container",
		Open: func(t testing.TB, dsn string) executor.Executor {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return cairnqpgx.New(pool, nil)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*cairnqpgx.Executor).Pool().Ping(ctx)
		},
	})
}
