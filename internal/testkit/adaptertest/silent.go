package adaptertest

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

// HangAfter is the watchdog of the connect timeout tests: a call that has
// not returned by then hangs. It detects a hang; it times nothing, so it
// is far above any connect timeout a test sets.
const HangAfter = 60 * time.Second

// SilentServer accepts TCP connections on 127.0.0.1. Its first relay
// connections are relayed to a real server, so a pool can get a working
// connection before the server goes silent; every later one is read and
// never answered, not a byte: a host whose Postgres hangs, or a proxy
// black-holing traffic. It is how the adapters' tests prove that no
// connection they make can hang without a bound. Listener and connections
// are closed at cleanup.
type SilentServer struct {
	ln       net.Listener
	relay    int32
	network  string // of the real server, for relayed connections
	upstream string
	accepted atomic.Int32

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
}

// StartSilentServer starts a SilentServer that relays its first relay
// connections to the real server at upstream on network (as net.Dial
// takes them; unused when relay is 0), closed when the test ends.
func StartSilentServer(t testing.TB, relay int32, network, upstream string) *SilentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SilentServer{ln: ln, relay: relay, network: network, upstream: upstream, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.close)
	return s
}

// Addr is the server's host:port, for a URL DSN.
func (s *SilentServer) Addr() string { return s.ln.Addr().String() }

// Port is the server's port, for a keyword/value DSN whose host is
// 127.0.0.1.
func (s *SilentServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Accepted is how many connections the server has accepted, relayed or
// not: a test that expects a timeout checks it, or it could pass having
// never reached the server.
func (s *SilentServer) Accepted() int32 { return s.accepted.Load() }

func (s *SilentServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if !s.track(c) {
			return
		}
		if s.accepted.Add(1) > s.relay {
			// Read (so the client's writes never block) and never answer.
			s.wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
			continue
		}
		up, err := net.Dial(s.network, s.upstream)
		if err != nil || !s.track(up) {
			_ = c.Close()
			continue
		}
		s.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
		s.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
	}
}

// track records c for close, or closes it when the server is closed.
func (s *SilentServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		_ = c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *SilentServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	s.wg.Wait()
}

// ShortConnect is the connect timeout a test gives an executor facing a
// silent server, so that giving up takes a moment rather than the
// adapter's default connect timeout.
const ShortConnect = 300 * time.Millisecond

// RelayedConnect is the connect timeout of the tests whose first
// connection reaches a real server through a relay: long enough for that
// connection to be made on a loaded machine running the race detector,
// short enough that each silent connection after it costs little.
const RelayedConnect = 2 * time.Second

// IsTimeout reports an error that says a deadline passed.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// OpenGivesUpOnASilentServer checks that an adapter's Open, facing a
// server that accepts the connection and never answers, returns a
// timeout instead of hanging, with a context that has no deadline: with
// no schema (a ping) and with one (the schema's statements). open opens
// an executor on srv with ShortConnect and schema.
func OpenGivesUpOnASilentServer(t *testing.T, open func(ctx context.Context, srv *SilentServer, schema string) (executor.Executor, error)) {
	srv := StartSilentServer(t, 0, "", "")
	for _, schema := range []string{"", "cairnq"} {
		err := Watchdog(t, "Open", func() error {
			e, err := open(context.Background(), srv, schema)
			if err == nil {
				_ = e.Close()
			}
			return err
		})
		if err == nil {
			t.Fatalf("schema %q: Open against a silent server succeeded", schema)
		}
		if !IsTimeout(err) {
			t.Errorf("schema %q: Open = %v, want a timeout", schema, err)
		}
	}
	if srv.Accepted() == 0 {
		t.Fatal("Open never reached the silent server: the test proves nothing")
	}
}

// Watchdog returns fn's error, failing the test if fn has not returned
// after HangAfter, so a call that hangs fails its test with a message
// naming what hung instead of running into the whole binary's timeout.
func Watchdog(t testing.TB, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(HangAfter)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatalf("%s has not returned after %v: it hangs", what, HangAfter)
		return nil
	}
}
