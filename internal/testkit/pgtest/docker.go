package pgtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

// The Docker path lives in a module of its own,
// github.com/cairnq/cairnq-go/conformance/pgdocker, so that
// testcontainers-go, the Docker client and OpenTelemetry stay out of the root
// module's graph. A test binary takes that path by importing the package for
// its side effect, which calls UseDocker from its init:
//
//	import _ "github.com/cairnq/cairnq-go/conformance/pgdocker"
//
// Without it, provisioning goes from EnvDSN straight to the local binaries.

// DockerServer is a PostgreSQL server a Docker start func ran.
type DockerServer struct {
	// AdminDSN is the DSN of the server's maintenance database, as a
	// superuser.
	AdminDSN string
	// Describe says what the server is, for test logs.
	Describe string
	// Stop removes the container; nil when there is nothing to remove.
	Stop func() error
}

// dockerFuncs is the Docker path a package registered with UseDocker.
type dockerFuncs struct {
	probe func(context.Context) error
	start func(context.Context) (DockerServer, error)
}

var (
	dockerMu  sync.Mutex
	dockerReg *dockerFuncs
)

// UseDocker links the Docker path into provisioning, between EnvDSN and
// the local binaries. probe returns nil when a Docker engine answers; it is
// given up on after a few seconds, and a panic in it counts as "no Docker".
// start runs a PostgreSQL container and returns it, removing what it made
// when it fails; it has a few minutes (an image pull), and pgtest then waits
// until a session on AdminDSN works. A container that cannot be started
// falls back to the local binaries.
//
// It is meant for the init of conformance/pgdocker; a later call
// replaces an earlier one. It panics when probe or start is nil.
func UseDocker(probe func(ctx context.Context) error, start func(ctx context.Context) (DockerServer, error)) {
	if probe == nil || start == nil {
		panic("pgtest.UseDocker: probe and start must not be nil")
	}
	dockerMu.Lock()
	defer dockerMu.Unlock()
	dockerReg = &dockerFuncs{probe: probe, start: start}
}

// registeredDocker returns the Docker path, or nil when none was linked in.
func registeredDocker() *dockerFuncs {
	dockerMu.Lock()
	defer dockerMu.Unlock()
	return dockerReg
}

// guardProbe bounds probe: it gives up after timeout and turns a panic into
// an error. The probe runs in a goroutine of its own, so one that ignores
// its context cannot hold provisioning.
func guardProbe(probe func(context.Context) error, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res := make(chan error, 1) // buffered: the probe never blocks on a gone receiver
		go func() {
			defer func() {
				if r := recover(); r != nil {
					res <- fmt.Errorf("docker probe panicked: %v", r)
				}
			}()
			res <- probe(ctx)
		}()
		select {
		case err := <-res:
			return err
		case <-ctx.Done():
			return fmt.Errorf("no answer from the docker engine: %w", ctx.Err())
		}
	}
}

// dockerStarter turns a registered start func into a server: it bounds the
// start by dockerStartTimeout and checks that a session works on the
// server it returns, since a container's wait strategy may only have seen
// its port open.
func dockerStarter(start func(context.Context) (DockerServer, error)) func(context.Context) (*server, error) {
	return func(ctx context.Context) (*server, error) {
		ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
		defer cancel()
		ds, err := start(ctx)
		if err != nil {
			return nil, err
		}
		srv := &server{source: sourceDocker, adminDSN: ds.AdminDSN, describe: ds.Describe, stop: ds.Stop}
		if srv.describe == "" {
			srv.describe = "docker container (" + pgdsn.Redact(ds.AdminDSN) + ")"
		}
		if ds.AdminDSN == "" {
			err = errors.New("the docker start func returned no DSN")
		} else {
			err = waitReady(ctx, ds.AdminDSN, nil)
		}
		if err != nil {
			if srv.stop != nil {
				_ = srv.stop()
			}
			return nil, err
		}
		return srv, nil
	}
}
