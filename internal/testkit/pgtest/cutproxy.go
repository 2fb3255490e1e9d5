package pgtest

import (
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

// CutProxy relays TCP connections on 127.0.0.1 to a Postgres server and
// cuts each one (both directions, at once) a random time between min and
// max after it opened, whatever is in flight on it: a network that drops
// connections all the time. It runs until the test ends.
type CutProxy struct {
	ln       net.Listener
	upstream string
	min, max time.Duration

	// Cut counts the connections cut while still open.
	Cut atomic.Int64

	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// StartCutProxy starts a CutProxy in front of the server dsn names and
// returns it with dsn rewritten to reach the same database through it.
func StartCutProxy(t testing.TB, dsn string, min, max time.Duration) (*CutProxy, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	through, err := pgdsn.WithHostPort(dsn, ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln, upstream: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), min: min, max: max, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p, through
}

func (p *CutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		life := p.min + rand.N(p.max-p.min+1)
		p.wg.Go(func() { p.relay(c, up, life) })
	}
}

// relay copies between c and up until either side ends or life is over.
func (p *CutProxy) relay(c, up net.Conn, life time.Duration) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	timer := time.NewTimer(life)
	defer timer.Stop()
	ended := 0
	select {
	case <-done:
		ended = 1
	case <-timer.C:
		p.Cut.Add(1)
	}
	_ = c.Close()
	_ = up.Close()
	for ; ended < 2; ended++ {
		<-done
	}
	p.untrack(c, up)
}

func (p *CutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *CutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *CutProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
