// Package pgdocker is the Docker path of internal/pgtest: a PostgreSQL
// container from testcontainers-go's postgres module, used when a Docker
// engine answers and CAIRNQ_TEST_PG_DSN is unset. It is a module of its own
// (github.com/cairnq/cairnq-go/internal/pgtest/pgdocker) so that
// testcontainers-go, the Docker client and OpenTelemetry stay out of the
// root module's graph, and so out of every program that imports cairnq.
//
// A test binary takes the Docker path by importing this package for its
// side effect; its init registers the path with [pgtest.UseDocker]:
//
//	import _ "github.com/cairnq/cairnq-go/internal/pgtest/pgdocker"
//
// Binaries that do not import it (the root module's tests among them) use
// CAIRNQ_TEST_PG_DSN or the local PostgreSQL binaries.
//
// This package's own tests certify an executor (the contract checks and
// every scenario) on a server from this path. Without a Docker engine they
// skip the certification, unless CAIRNQ_REQUIRE_DOCKER is set to a true
// value, which makes a missing engine a failure.
package pgdocker

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// Image is the container's image; its major version matches the
// PostgreSQL 15 the local path finds on the project's machines.
const Image = "postgres:15-alpine"

func init() { pgtest.UseDocker(reachable, start) }

// reachable returns nil when a Docker engine answers testcontainers' own
// provider health check. With no Docker host configured it fails in about
// a millisecond; pgtest bounds it in time and recovers a panic in it.
func reachable(ctx context.Context) error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	return p.Health(ctx) // Health closes the provider
}

// start runs a PostgreSQL container with the same speed settings as the
// local path, and removes it when it cannot say how to reach it.
func start(ctx context.Context) (pgtest.DockerServer, error) {
	ctr, err := tcpostgres.Run(ctx, Image,
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
		return pgtest.DockerServer{}, fmt.Errorf("run %s: %w", Image, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return pgtest.DockerServer{}, fmt.Errorf("container connection string: %w", err)
	}
	return pgtest.DockerServer{
		AdminDSN: dsn,
		Describe: fmt.Sprintf("docker container %s (%s)", ctr.GetContainerID(), Image),
		Stop: func() error {
			return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(10*time.Second))
		},
	}, nil
}
