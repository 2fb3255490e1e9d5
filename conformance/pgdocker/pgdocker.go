// Package pgdocker adds the Docker path to the PostgreSQL that
// pgserver.Main and pgserver.DSN provision: a
// container from testcontainers-go's postgres module, used when
// CAIRNQ_TEST_PG_DSN is unset and a Docker engine answers, before the
// local PostgreSQL binaries. It is a module of its own so that
// testcontainers-go, the Docker client and OpenTelemetry reach only the
// test binaries that ask for them, never a program that imports cairnq.
//
// A test binary takes the path by importing the package for its side
// effect, beside its TestMain:
//
//	import _ "github.com/cairnq/cairnq-go/conformance/pgdocker"
//
//	func TestMain(m *testing.M) { pgserver.Main(m) }
//
// The image is CAIRNQ_PG_IMAGE, default [DefaultImage]; any image keeping
// the official postgres image's contract works (POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB, a command of `postgres -c ...`, the
// readiness line logged twice on a first start), such as the one
// docker/postgres/build.sh in this repository builds where no registry is
// reachable. The container is removed when pgserver.Main's tests end.
// testcontainers' reaper (Ryuk) is turned off when its image is neither
// present nor pullable, since the tests remove their container themselves;
// TESTCONTAINERS_RYUK_DISABLED, when set, decides instead.
//
// This package's own tests certify the pgx executor (every contract check
// and every scenario) on a container. Without a Docker engine they skip,
// unless CAIRNQ_REQUIRE_DOCKER is true, which makes a missing engine, or a
// server that did not come from Docker, a failure.
package pgdocker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// DefaultImage is the image when CAIRNQ_PG_IMAGE is unset; its major
// version matches the PostgreSQL 15 the local path finds on the project's
// machines.
const DefaultImage = "postgres:15-alpine"

// EnvImage names the variable that picks another image.
const EnvImage = "CAIRNQ_PG_IMAGE"

// envRyukDisabled is testcontainers' own switch for its reaper.
const envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"

func init() { pgtest.UseDocker(reachable, start) }

// Image returns the image the container runs.
func Image() string {
	if img := strings.TrimSpace(os.Getenv(EnvImage)); img != "" {
		return img
	}
	return DefaultImage
}

// reachable returns nil when a Docker engine answers testcontainers' own
// provider health check. With no Docker host configured it fails in about
// a millisecond; pgtest bounds it in time and recovers a panic in it.
func reachable(ctx context.Context) error {
	decideRyuk(ctx)
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	return p.Health(ctx) // Health closes the provider
}

var ryukOnce sync.Once

// decideRyuk turns testcontainers' reaper off, once per process and before
// testcontainers reads its configuration, when the reaper's image is not
// on the engine and cannot be pulled: the reaper would fail every start,
// and the tests remove their container themselves. It leaves the choice
// alone when TESTCONTAINERS_RYUK_DISABLED is set or the engine cannot be
// asked.
func decideRyuk(ctx context.Context) {
	ryukOnce.Do(func() {
		if _, set := os.LookupEnv(envRyukDisabled); set {
			return
		}
		cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer cli.Close()
		img := testcontainers.ReaperDefaultImage
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := cli.ImageInspect(ctx, img); err == nil {
			return
		} else if !errdefs.IsNotFound(err) {
			return // the engine did not answer; reachable will say so
		}
		pull, err := cli.ImagePull(ctx, img, client.ImagePullOptions{})
		if err == nil {
			err = pull.Wait(ctx)
		}
		if err == nil {
			return
		}
		fmt.Fprintf(os.Stderr, "pgdocker: testcontainers' reaper image %s cannot be pulled (%v); reaper off, the tests remove their container themselves\n", img, err)
		os.Setenv(envRyukDisabled, "true")
	})
}

// start runs a PostgreSQL container with the same speed settings as the
// local path, and removes it when it cannot say how to reach it.
func start(ctx context.Context) (pgtest.DockerServer, error) {
	img := Image()
	ctr, err := tcpostgres.Run(ctx, img,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections=200",
			"-c", "shared_buffers=32MB"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return pgtest.DockerServer{}, fmt.Errorf("run %s: %w", img, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return pgtest.DockerServer{}, fmt.Errorf("container connection string: %w", err)
	}
	return pgtest.DockerServer{
		AdminDSN: dsn,
		Describe: fmt.Sprintf("docker container %.12s (%s)", ctr.GetContainerID(), img),
		Stop: func() error {
			return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(10*time.Second))
		},
	}, nil
}
