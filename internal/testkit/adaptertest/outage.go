package adaptertest

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// The calls the outage test keeps making, each from goroutines of its
// own: the client's unkeyed and keyed submits and a read, and the
// executor's own statements, alone and in a transaction, for an
// application that runs its statements on it.
const (
	outageSubmit      = "submit"
	outageSubmitKeyed = "keyed submit"
	outageGet         = "get"
	outageQuery       = "executor query"
	outageTx          = "executor tx"
)

// outageCalls is how many goroutines make each call.
const outageCalls = 2

// restartTimeout bounds the restart of the private cluster: a hang, not a
// timing.
const restartTimeout = 2 * time.Minute

// SubmitOutage restarts a private cluster the way `pg_ctl restart -m
// immediate` does (every connection dropped, the server refusing
// connections, then starting up and running crash recovery) under a
// client on the executor open returns, while goroutines keep submitting,
// reading, and running statements on the executor itself. Every call that
// fails must fail with an error that errors.Is finds
// cairnq.ErrUnavailable in, whatever the adapter: that is how a program
// tells an outage from a bug. It checks that some call did fail (the
// restart was seen), and that every kind of call succeeds again once the
// server is back.
func SubmitOutage(t *testing.T, open Opener) { submitOutage(t, open, "", true) }

// SubmitOutageClient is SubmitOutage with the client's calls only, for an
// executor written elsewhere (see Foreign), which marks nothing itself:
// the store marks what reaches it.
func SubmitOutageClient(t *testing.T, open Opener) { submitOutage(t, open, "", false) }

// SubmitOutageBehindPooler is SubmitOutage through a pgbouncer in mode in
// front of the cluster, which says the server is gone in words of its own
// (SQLSTATE 08P01: "server conn crashed?", "server login has been
// failing"), and keeps answering while it is. pgbouncer waits its
// server_login_retry (15 seconds) after a failed server login before it
// tries again, so the test lasts that long.
func SubmitOutageBehindPooler(t *testing.T, mode pgtest.PoolMode, open Opener) {
	submitOutage(t, open, mode, true)
}

// submitOutage is SubmitOutage, through a pooler in mode unless mode is
// "", making calls on the executor itself too when executorCalls.
func submitOutage(t *testing.T, open Opener, mode pgtest.PoolMode, executorCalls bool) {
	cl := pgtest.NewCluster(t)
	var logs syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client log:\n%s\nserver log:\n%s", logs.String(), cl.LogTail(30))
		}
	})
	dsn := cl.DSN()
	if mode != "" {
		dsn = pgtest.Pooler(t, dsn, mode)
	}
	ex := open(t, dsn)
	ctx := Ctx(t)
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Options: cairnq.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	seed, err := c.Submit(ctx, "outage", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	calls := outageCallFuncs(ctx, c, ex, seed.ID, executorCalls)
	rec := newOutageRecord(calls)
	stop := startOutageCalls(calls, rec)
	defer stop()

	restartUnderCalls(t, cl, rec)
	stop()

	checkOutageFailures(t, rec)
}

// outageCallFuncs returns the calls the outage test keeps making, by name,
// each given a number unique across calls: the client's on c, reading the
// task seedID, and, when executorCalls, the executor's own on ex.
func outageCallFuncs(ctx context.Context, c *cairnq.Client, ex executor.Executor, seedID string, executorCalls bool) map[string]func(i int) error {
	calls := map[string]func(i int) error{
		outageSubmit: func(int) error {
			_, err := c.Submit(ctx, "outage", nil, nil)
			return err
		},
		outageSubmitKeyed: func(i int) error {
			_, err := c.Submit(ctx, "outage", nil, &cairnq.SubmitOptions{Key: fmt.Sprint("key-", i)})
			return err
		},
		outageGet: func(int) error {
			_, err := c.Get(ctx, seedID)
			return err
		},
		outageQuery: func(int) error {
			_, err := ex.Query(ctx, "SELECT 1 AS one")
			return err
		},
		outageTx: func(int) error {
			return ex.Tx(ctx, func(ctx context.Context, s executor.Session) error {
				_, err := s.Query(ctx, "SELECT 1 AS one")
				return err
			})
		},
	}
	if !executorCalls {
		delete(calls, outageQuery)
		delete(calls, outageTx)
	}
	return calls
}

// outageFailure is a call that failed, and its error.
type outageFailure struct {
	call string
	err  error
}

// outageRecord is what the calling goroutines saw: every failure, how
// many calls succeeded, and how many of each kind succeeded after the
// restart (a call counts there when it started once restarted was set).
type outageRecord struct {
	mu        sync.Mutex
	failures  []outageFailure
	ok        atomic.Int64
	restarted atomic.Bool
	okAfter   map[string]*atomic.Int64
}

// newOutageRecord returns an empty record for calls.
func newOutageRecord(calls map[string]func(i int) error) *outageRecord {
	rec := &outageRecord{okAfter: map[string]*atomic.Int64{}}
	for name := range calls {
		rec.okAfter[name] = new(atomic.Int64)
	}
	return rec
}

// startOutageCalls starts outageCalls goroutines for each of calls, each
// making its call over and over into rec. The stop it returns ends them
// and waits until they have; it may be called more than once.
func startOutageCalls(calls map[string]func(i int) error, rec *outageRecord) (stop func()) {
	var (
		done = make(chan struct{})
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for name, call := range calls {
		for range outageCalls {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					after := rec.restarted.Load()
					if err := call(int(next.Add(1))); err != nil {
						rec.mu.Lock()
						rec.failures = append(rec.failures, outageFailure{name, err})
						rec.mu.Unlock()
						// Paces a goroutine while the server is down; it
						// waits for nothing.
						time.Sleep(time.Millisecond)
						continue
					}
					rec.ok.Add(1)
					if after {
						rec.okAfter[name].Add(1)
					}
				}
			})
		}
	}
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		wg.Wait()
	}
}

// restartUnderCalls waits for calls to succeed, restarts cl with
// RestartImmediate, and waits for every kind of call to succeed again.
func restartUnderCalls(t *testing.T, cl *pgtest.Cluster, rec *outageRecord) {
	t.Helper()
	Poll(t, "calls to succeed before the restart", func() bool { return rec.ok.Load() >= 50 })
	rctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	defer cancel()
	at := time.Now()
	if err := cl.RestartImmediate(rctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the server was back after %v", time.Since(at).Round(time.Millisecond))
	rec.restarted.Store(true)
	Poll(t, "every kind of call to succeed again after the restart", func() bool {
		for _, n := range rec.okAfter {
			if n.Load() < 5 {
				return false
			}
		}
		return true
	})
}

// checkOutageFailures checks that some call failed across the restart,
// and that errors.Is finds cairnq.ErrUnavailable in every failure.
func checkOutageFailures(t *testing.T, rec *outageRecord) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.failures) == 0 {
		t.Fatal("no call failed across the restart: the outage was not seen, so nothing was checked")
	}
	perCall := map[string]int{}
	untyped := map[string]int{} // call, type and message of each failure not ErrUnavailable
	for _, f := range rec.failures {
		perCall[f.call]++
		if !errors.Is(f.err, cairnq.ErrUnavailable) {
			untyped[fmt.Sprintf("%s: %T: %v", f.call, f.err, f.err)]++
		}
	}
	t.Logf("%d calls succeeded; failures across the restart: %v", rec.ok.Load(), perCall)
	if len(untyped) > 0 {
		lines := make([]string, 0, len(untyped))
		for l, n := range untyped {
			lines = append(lines, fmt.Sprintf("%5d × %s", n, l))
		}
		slices.Sort(lines)
		t.Errorf("failures that errors.Is does not find cairnq.ErrUnavailable in:\n%s", strings.Join(lines, "\n"))
	}
}

// OpenOutage opens on a port where nothing listens, as a program starting
// before its database does: a connection refused is an outage there too.
// Open (open with no schema) may fail, as an adapter's Open that checks
// the server answers does, or succeed, as an executor over a pool that
// connects on first use does; then cairnq.OpenPostgres fails. Either
// failure must be one errors.Is finds cairnq.ErrUnavailable in.
func OpenOutage(t *testing.T, open SchemaOpener) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from now on
	dsn := "postgres://postgres@" + addr + "/cairnq?sslmode=disable&connect_timeout=5"
	ctx := Ctx(t)
	ex, err := open(t, dsn, "")
	if err == nil {
		var c *cairnq.Client
		if c, err = cairnq.OpenPostgres(ctx, ex, nil); err == nil {
			c.Close()
			t.Fatal("OpenPostgres on a port where nothing listens succeeded")
		}
	}
	if !errors.Is(err, cairnq.ErrUnavailable) {
		t.Errorf("open on a port where nothing listens: %T %v, want ErrUnavailable", err, err)
	}
	var op *net.OpError
	if !errors.As(err, &op) && !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("open on a port where nothing listens: %v, want the driver's error inside", err)
	}
}

// ConnectRefusedByAPooler opens through a pgbouncer that refuses every
// connection for good, with the SQLSTATE it also answers mid-session when
// it lost its server (08P01), which there is an outage:
//   - a database the pooler does not know;
//   - a startup parameter it does not pass on (statement_timeout in the
//     DSN);
//   - a database the server does not have, whose refusal of the pooler's
//     login pgbouncer passes on to the client at connect (with 08P01
//     before pgbouncer 1.20, with the server's 3D000 since).
//
// open (with no schema) may fail, as an adapter's Open that checks the
// server answers does, or succeed, as an executor over a pool that
// connects on first use does; then cairnq.OpenPostgres, its first
// statements, fails. Either failure must hold the pooler's SQLSTATE and
// be no outage: errors.Is finds no cairnq.ErrUnavailable in it, since a
// program retrying an outage would retry this one forever.
//
// The last case runs on an open that fails only. An executor connecting
// on first use probes its route first, and that probe takes the
// refusal: pgbouncer then holds the next client's login for its
// server_login_retry (15 seconds) before it asks the server again, and a
// client's connect timeout may end that wait first, which is an outage.
func ConnectRefusedByAPooler(t *testing.T, open SchemaOpener) {
	dsn := pgtest.DSN(t)
	pooled := pgtest.Pooler(t, dsn, pgtest.PoolTransaction)
	unknown, err := pgdsn.WithDatabase(pooled, "cairnq_not_pooled")
	if err != nil {
		t.Fatal(err)
	}
	param, err := withParam(pooled, "statement_timeout", "5000")
	if err != nil {
		t.Fatal(err)
	}
	// pgtest.Pooler names the server's database for the pooler's.
	missing, err := pgdsn.WithDatabase(dsn, "cairnq_not_on_the_server")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dsn      string
		codes    []string // what the pooler may answer
		openOnly bool     // see above
	}{
		{"a database the pooler does not know", unknown, []string{"08P01"}, false},
		{"a startup parameter the pooler refuses", param, []string{"08P01"}, false},
		{"a database the server does not have", pgtest.Pooler(t, missing, pgtest.PoolTransaction), []string{"08P01", "3D000"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := Ctx(t)
			ex, err := open(t, c.dsn, "")
			if err == nil {
				if c.openOnly {
					t.Skip("the executor connects on first use, after a route probe that takes the refusal; see ConnectRefusedByAPooler")
				}
				var cl *cairnq.Client
				if cl, err = cairnq.OpenPostgres(ctx, ex, nil); err == nil {
					cl.Close()
					t.Fatal("OpenPostgres through a pooler that refuses the connection succeeded")
				}
			}
			if errors.Is(err, cairnq.ErrUnavailable) {
				t.Errorf("refused at connect, it reads as an outage: %T %v", err, err)
			}
			var st interface{ SQLState() string }
			if !errors.As(err, &st) || !slices.Contains(c.codes, st.SQLState()) {
				t.Errorf("refused at connect: %T %v, want the pooler's SQLSTATE (%s) inside", err, err, strings.Join(c.codes, " or "))
			}
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("refused at connect: %v, want an answer, not a wait", err)
			}
			t.Logf("refused at connect: %v", err)
		})
	}
}

// withParam returns dsn with key set to value, in whichever of the two
// forms dsn is written.
func withParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " " + key + "=" + value, nil
}
