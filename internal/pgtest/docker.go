package pgtest

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// dockerImage is the image of the container path; its major version matches
// the PostgreSQL 15 the local path finds on the project's machines.
const dockerImage = "postgres:15-alpine"

// dockerReachable returns nil when a Docker engine answers testcontainers'
// own provider health check. It never panics and gives up after
// dockerProbeTimeout; with no Docker host configured it fails in about a
// millisecond.
func dockerReachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	res := make(chan error, 1) // buffered: the probe never blocks on a gone receiver
	go func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("docker probe panicked: %v", r)
			}
		}()
		p, err := testcontainers.NewDockerProvider()
		if err != nil {
			res <- err
			return
		}
		res <- p.Health(ctx) // Health closes the provider
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer from the docker engine: %w", ctx.Err())
	}
}

// startDocker runs a PostgreSQL container with the same speed settings as
// the local path.
func startDocker(ctx context.Context) (*server, error) {
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	ctr, err := tcpostgres.Run(ctx, dockerImage,
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
		return nil, fmt.Errorf("run %s: %w", dockerImage, err)
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	srv := &server{
		source:   sourceDocker,
		adminDSN: dsn,
		describe: fmt.Sprintf("docker container %s (%s)", ctr.GetContainerID(), dockerImage),
		stop: func() error {
			return testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(10*time.Second))
		},
	}
	// The wait strategy saw the port open; make sure a session works too.
	if err := waitReady(ctx, dsn, nil); err != nil {
		_ = srv.stop()
		return nil, err
	}
	return srv, nil
}
