package cairnqpgx_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// fakeServer speaks just enough of the wire protocol for pgx to connect and
// run simple queries, so a test can play a server (or proxy) that refuses
// LISTEN, which a real Postgres never does. answer sees the 1-based number
// of the connection and the query text and returns the SQLSTATE to fail
// with ("" for success) and whether to drop the connection right after
// answering.
type fakeServer struct {
	ln     net.Listener
	answer func(conn int, sql string) (code string, hangUp bool)
	conns  atomic.Int32
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   map[net.Conn]struct{}
}

func startFake(t *testing.T, answer func(conn int, sql string) (string, bool)) (dsn string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, answer: answer, open: map[net.Conn]struct{}{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.open[c] = struct{}{}
			s.mu.Unlock()
			n := int(s.conns.Add(1))
			s.wg.Go(func() { s.serve(c, n) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return "postgres://fake@" + ln.Addr().String() + "/fake?sslmode=disable&connect_timeout=5"
}

func (s *fakeServer) serve(c net.Conn, n int) {
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}()
	b := pgproto3.NewBackend(c, c)
	for {
		msg, err := b.ReceiveStartupMessage()
		if err != nil {
			return
		}
		if _, ok := msg.(*pgproto3.StartupMessage); ok {
			break
		}
		if _, err := c.Write([]byte("N")); err != nil { // no SSL, no GSS
			return
		}
	}
	b.Send(&pgproto3.AuthenticationOk{})
	b.Send(&pgproto3.ParameterStatus{Name: "standard_conforming_strings", Value: "on"})
	b.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "15.0"})
	b.Send(&pgproto3.BackendKeyData{ProcessID: uint32(n), SecretKey: []byte{1, 2, 3, 4}})
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if b.Flush() != nil {
		return
	}
	for {
		msg, err := b.Receive()
		if err != nil {
			return
		}
		q, ok := msg.(*pgproto3.Query)
		if !ok {
			return // Terminate, or anything this fake does not speak
		}
		if q.String == pidQuery { // the listener's session check: a server of its own
			b.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("pg_backend_pid"), DataTypeOID: 23, DataTypeSize: 4, Format: 0}}})
			b.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(strconv.Itoa(n))}})
			b.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if b.Flush() != nil {
				return
			}
			continue
		}
		code, hangUp := s.answer(n, q.String)
		if code == silent {
			continue // never answer: a half-open connection
		}
		if code != "" {
			b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: code, Message: "fake server refuses " + q.String})
		} else {
			b.Send(&pgproto3.CommandComplete{CommandTag: []byte("LISTEN")})
		}
		b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		if b.Flush() != nil || hangUp {
			return
		}
	}
}

// pidQuery is what a listener asks before LISTEN to learn the server
// session it runs in; the fake answers it as a server of its own would,
// with the process id of its backend key.
const pidQuery = "SELECT pg_backend_pid()"

// silent, as an answer's code, leaves the query unanswered.
const silent = "silent"

func fakePool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn) // lazy: no connection yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestListenRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	dsn := startFake(t, func(_ int, sql string) (string, bool) {
		if strings.HasPrefix(sql, "LISTEN") {
			return "0A000", false
		}
		return "", false
	})
	e := cairnqpgx.New(fakePool(t, dsn), nil)
	defer e.Close()
	stop, err := e.Listen(adaptertest.Ctx(t), []string{"c"}, func(string, string) {})
	if err == nil {
		stop()
		t.Fatal("Listen succeeded against a server refusing LISTEN")
	}
	if !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("err = %v, want ErrListenUnavailable", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
		t.Errorf("err = %v, want the server's 0A000 kept", err)
	}
}

func TestListenOtherFailureIsNotUnavailable(t *testing.T) {
	t.Parallel()
	dsn := startFake(t, func(int, string) (string, bool) { return "42501", false })
	e := cairnqpgx.New(fakePool(t, dsn), nil)
	defer e.Close()
	_, err := e.Listen(adaptertest.Ctx(t), []string{"c"}, func(string, string) {})
	if err == nil || errors.Is(err, executor.ErrListenUnavailable) {
		t.Fatalf("err = %v, want a plain (retryable) error", err)
	}
}

// TestListenStopsRetryingWhenRefused: the first connection listens and then
// drops; every later one is refused with 0A000, so the listener logs
// ErrListenUnavailable and its goroutine ends on its own.
func TestListenStopsRetryingWhenRefused(t *testing.T) {
	t.Parallel()
	const channel = "cairnq_refused_later"
	dsn := startFake(t, func(conn int, sql string) (string, bool) {
		if conn == 1 {
			return "", true // LISTEN accepted, then the connection drops
		}
		return "0A000", false
	})
	var logs syncbuf.Buffer
	var reconnects atomic.Int32
	e := cairnqpgx.New(fakePool(t, dsn), &cairnqpgx.Options{
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnReconnect: func() { reconnects.Add(1) },
	})
	defer e.Close()
	stop, err := e.Listen(adaptertest.Ctx(t), []string{channel}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	adaptertest.Poll(t, "the refusal to be logged", func() bool {
		out := logs.String()
		return strings.Contains(out, executor.ErrListenUnavailable.Error()) && strings.Contains(out, "0A000")
	})
	adaptertest.Poll(t, "the listener goroutine to give up", func() bool { return adaptertest.ListenerGoroutines(t, channel) == 0 })
	if n := reconnects.Load(); n != 0 {
		t.Fatalf("OnReconnect ran %d times without a reconnect", n)
	}
	stop() // the goroutine is already gone: returns at once
}

// TestListenReplacesUnansweringConnection: the first connection takes the
// LISTEN and then stops answering (no FIN, no RST); the idle ping times out
// and the listener moves to a new connection.
func TestListenReplacesUnansweringConnection(t *testing.T) {
	t.Parallel()
	dsn := startFake(t, func(conn int, sql string) (string, bool) {
		if conn == 1 && !strings.HasPrefix(sql, "LISTEN") {
			return silent, false
		}
		return "", false
	})
	reconnected := make(chan struct{}, 4)
	e := cairnqpgx.New(fakePool(t, dsn), &cairnqpgx.Options{
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	defer e.Close()
	cairnqpgx.SetListenHealth(e, 20*time.Millisecond, 200*time.Millisecond)
	stop, err := e.Listen(adaptertest.Ctx(t), []string{"c"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-reconnected:
	case <-time.After(adaptertest.WaitTimeout):
		t.Fatal("the unanswering connection was never replaced")
	}
}
