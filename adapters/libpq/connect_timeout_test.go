package cairnqlibpq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
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
		dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable", srv.Port())
		return cairnqlibpq.Open(ctx, dsn, &cairnqlibpq.Options{ConnectTimeout: adaptertest.ShortConnect, Schema: schema})
	})
}

// TestListenGivesUpOnASilentServer: lib/pq's listener dials from the DSN,
// which sets no connect_timeout here; the executor's connect timeout still
// ends the first attempt, with a context that has no deadline. Both DSN
// forms are rewritten for the listener. Not parallel: it counts the
// process's listener goroutines.
func TestListenGivesUpOnASilentServer(t *testing.T) {
	srv := adaptertest.StartSilentServer(t, 0, "", "")
	for _, dsn := range []string{
		fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable", srv.Port()),
		fmt.Sprintf("postgres://x@127.0.0.1:%d/x?sslmode=disable", srv.Port()),
	} {
		before := srv.Accepted()
		e := cairnqlibpq.New(appDB(t, dsn), dsn, &cairnqlibpq.Options{ConnectTimeout: adaptertest.ShortConnect})
		err := adaptertest.Watchdog(t, "Listen", func() error {
			stop, err := e.Listen(context.Background(), []string{"a"}, func(string, string) {})
			if err == nil {
				stop()
			}
			return err
		})
		if err == nil || errors.Is(err, executor.ErrListenUnavailable) || !adaptertest.IsTimeout(err) {
			t.Errorf("%s: Listen = %v, want a transient timeout", dsn, err)
		}
		if srv.Accepted() == before {
			t.Fatalf("%s: Listen never reached the silent server: the test proves nothing", dsn)
		}
		requireNoListenerGoroutines(t)
	}
}

// TestOpenBoundsLaterConnections: the pool's connections after the first
// are bounded too, and so is the listener's. The first two connections
// reach a real server; every later one meets silence. Not parallel: it counts
// the process's listener goroutines.
func TestOpenBoundsLaterConnections(t *testing.T) {
	real, err := pq.NewConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	network, upstream := "tcp", net.JoinHostPort(real.Host, fmt.Sprint(real.Port))
	if strings.HasPrefix(real.Host, "/") {
		network, upstream = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", real.Host, real.Port)
	}
	// Two real connections: Open's check, then the one held below.
	srv := adaptertest.StartSilentServer(t, 2, network, upstream)
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable",
		srv.Port(), quoteValue(real.User), quoteValue(real.Password), quoteValue(real.Database))
	e := open(t, dsn, &cairnqlibpq.Options{ConnectTimeout: adaptertest.RelayedConnect})
	// Keep the one working connection busy, so the ping below needs a new
	// one.
	held, err := e.DB().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Close() })

	err = adaptertest.Watchdog(t, "a ping on a new connection", func() error {
		return e.DB().PingContext(context.Background())
	})
	if err == nil || !adaptertest.IsTimeout(err) {
		t.Errorf("PingContext = %v, want a timeout", err)
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
	requireNoListenerGoroutines(t)
	if n := srv.Accepted(); n < 3 {
		t.Fatalf("%d connections reached the server, want at least 3: the test proves nothing", n)
	}
}

// quoteValue quotes v for a keyword/value DSN.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// TestOpenHonoursItsContext: a context that ends while Open waits on a
// server that accepted the connection and never answers ends Open, however
// long the connect timeout. lib/pq bounds a connection's startup by
// connect_timeout alone, which made Open wait out 10 seconds behind a
// context of 3.
func TestOpenHonoursItsContext(t *testing.T) {
	t.Parallel()
	srv := adaptertest.StartSilentServer(t, 0, "", "")
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=x dbname=x sslmode=disable", srv.Port())
	for _, schema := range []string{"", "cairnq"} {
		err := adaptertest.Watchdog(t, "Open", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			// The connect timeout alone would outlast the watchdog.
			e, err := cairnqlibpq.Open(ctx, dsn, &cairnqlibpq.Options{ConnectTimeout: 2 * adaptertest.HangAfter, Schema: schema})
			if err == nil {
				_ = e.Close()
			}
			return err
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("schema %q: Open = %v, want context.DeadlineExceeded", schema, err)
		}
	}
	if srv.Accepted() == 0 {
		t.Fatal("Open never reached the silent server: the test proves nothing")
	}
}

// TestOpenRefusesBadSchemaNames: a schema name that is not a plain
// identifier is an *ArgumentError, before anything is sent anywhere.
func TestOpenRefusesBadSchemaNames(t *testing.T) {
	t.Parallel()
	const dsn = "host=127.0.0.1 port=1 user=x dbname=x sslmode=disable connect_timeout=5"
	for _, schema := range []string{`x"; drop table cairnq_tasks; --`, strings.Repeat("s", 64), "1abc", "a b"} {
		_, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: schema})
		var arg *cairnq.ArgumentError
		if !errors.As(err, &arg) || arg.Arg != "schema" || !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("schema %q: err = %v (%T), want a *cairnq.ArgumentError for the schema", schema, err, err)
		}
	}
}
