package cairnqpgx_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// TestOpenGivesUpOnASilentServer: a server that accepts the connection and
// never answers must not hang Open, even with a context that has no
// deadline.
func TestOpenGivesUpOnASilentServer(t *testing.T) {
	t.Parallel()
	adaptertest.OpenGivesUpOnASilentServer(t, func(ctx context.Context, srv *adaptertest.SilentServer, schema string) (executor.Executor, error) {
		dsn := "postgres://nobody@" + srv.Addr() + "/none?sslmode=disable"
		return cairnqpgx.Open(ctx, dsn, &cairnqpgx.Options{ConnectTimeout: adaptertest.ShortConnect, Schema: schema})
	})
}

// TestOpenBoundsLaterConnections: the pool's connections after the first,
// the LISTEN connection among them, are bounded too. The first connection
// reaches a real server; every later one meets silence.
func TestOpenBoundsLaterConnections(t *testing.T) {
	t.Parallel()
	real, err := pgconn.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	network, upstream := pgconn.NetworkAddress(real.Host, real.Port)
	srv := adaptertest.StartSilentServer(t, 1, network, upstream)
	dsn := (&url.URL{
		Scheme: "postgres", User: url.UserPassword(real.User, real.Password), Host: srv.Addr(),
		Path: "/" + real.Database, RawQuery: "sslmode=disable",
	}).String()
	e, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{ConnectTimeout: adaptertest.RelayedConnect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	// Keep the one working connection busy, so every call below needs a
	// new one.
	held, err := e.Pool().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release)

	err = adaptertest.Watchdog(t, "Query on a new connection", func() error {
		_, err := e.Query(context.Background(), "SELECT 1 AS one")
		return err
	})
	if err == nil || !adaptertest.IsTimeout(err) {
		t.Errorf("Query = %v, want a timeout", err)
	}
	err = adaptertest.Watchdog(t, "Listen", func() error {
		stop, err := e.Listen(context.Background(), []string{"c"}, func(string, string) {})
		if err == nil {
			stop()
		}
		return err
	})
	if err == nil || !adaptertest.IsTimeout(err) {
		t.Errorf("Listen = %v, want a timeout", err)
	}
	if n := srv.Accepted(); n < 3 {
		t.Fatalf("%d connections reached the server, want at least 3: the test proves nothing", n)
	}
}

// TestConnectTimeoutPrecedence: Options.ConnectTimeout, else the DSN's
// connect_timeout, else DefaultConnectTimeout.
func TestConnectTimeoutPrecedence(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "") // pgconn ignores it when empty
	for _, c := range []struct {
		name string
		dsn  string
		opt  time.Duration
		want time.Duration
	}{
		{"URL without", "postgres://x@127.0.0.1:1/db", 0, cairnqpgx.DefaultConnectTimeout},
		{"keyword/value without", "host=127.0.0.1 port=1 user=x", 0, cairnqpgx.DefaultConnectTimeout},
		{"DSN's own", "postgres://x@127.0.0.1:1/db?connect_timeout=7", 0, 7 * time.Second},
		{"keyword/value DSN's own", "host=127.0.0.1 connect_timeout=3", 0, 3 * time.Second},
		{"DSN's zero counts as unset", "postgres://x@127.0.0.1:1/db?connect_timeout=0", 0, cairnqpgx.DefaultConnectTimeout},
		{"option over DSN", "postgres://x@127.0.0.1:1/db?connect_timeout=7", adaptertest.ShortConnect, adaptertest.ShortConnect},
		{"option alone", "postgres://x@127.0.0.1:1/db", 2 * time.Minute, 2 * time.Minute},
	} {
		cfg, err := cairnqpgx.PoolConfig(c.dsn, &cairnqpgx.Options{ConnectTimeout: c.opt})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := cfg.ConnConfig.ConnectTimeout; got != c.want {
			t.Errorf("%s: ConnectTimeout = %v, want %v", c.name, got, c.want)
		}
	}
	cfg, err := cairnqpgx.PoolConfig("postgres://x@127.0.0.1:1/db", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.ConnectTimeout; got != cairnqpgx.DefaultConnectTimeout {
		t.Errorf("nil options: ConnectTimeout = %v, want DefaultConnectTimeout", got)
	}
	if cairnqpgx.DefaultConnectTimeout != 10*time.Second {
		t.Errorf("DefaultConnectTimeout = %v, documented as 10 seconds", cairnqpgx.DefaultConnectTimeout)
	}
	if _, err := cairnqpgx.PoolConfig("postgres://x@127.0.0.1:1/db", &cairnqpgx.Options{ConnectTimeout: -time.Second}); err == nil {
		t.Error("a negative ConnectTimeout was accepted")
	}
}
