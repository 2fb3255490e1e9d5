// Package pgroute tells a connection whose statements all run in one
// server session (straight to the server, or through a relay of bytes)
// from one that goes through a connection pooler, so that the adapters
// keep statements prepared on the server only where every round trip of a
// client connection reaches the same server session.
//
// Behind a transaction-mode pooler (pgbouncer with pool_mode=transaction,
// a hosted "pooled" endpoint) each transaction, and each statement outside
// one, may run on another server connection. A statement prepared under a
// name on one of them is then bound by that name on another, which never
// prepared it or prepared something else under it. Three facts a client
// can check tell that nothing of the kind stands between: the server sees
// the same TCP connection at both ends as the client socket (no proxy can
// make it see that), or the Unix socket the client connected to is one the
// server listens on, or the backend key the server sent at startup names
// the session the connection's statements run in (a pooler gives its
// clients keys of its own; a relay of bytes passes the server's on). The
// adapters prepare only where one of them holds, and send every statement
// unnamed otherwise: a pooler in session mode, where preparing would be
// safe, costs a parse per statement and nothing else.
//
// This package imports only the standard library, so that
// executor/sqlexec can use it and still import no driver.
package pgroute

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Query is the statement a probe runs on the connection it checks: where
// the server sees the connection come from and arrive at (NULLs on a Unix
// socket), and the server session's process id. It takes no arguments, so
// it is sent with the simple query protocol and leaves nothing behind on
// the server.
const Query = "SELECT host(inet_client_addr()) AS client_addr, inet_client_port() AS client_port, " +
	"host(inet_server_addr()) AS server_addr, inet_server_port() AS server_port, pg_backend_pid() AS pid, " +
	"current_setting('port') AS port, " +
	// pg_settings shows the socket directories to a role that may read
	// them and hides the row from any other, where current_setting fails.
	"(SELECT setting FROM pg_settings WHERE name = 'unix_socket_directories') AS socket_dirs"

// Columns is how many columns Query returns.
const Columns = 7

// Route is what a probe found.
type Route struct {
	// Direct is true when the server sees the connection come from the
	// client socket's own address and port and arrive at the address and
	// port the socket is connected to: the same TCP connection at both
	// ends, which no proxy can fake (a local port alone can be shared by
	// sockets to different destinations, a pooler's among them). On a Unix
	// socket, where the server sees no address, it is true when the socket
	// the client connected to is one the server itself listens on (one of
	// its unix_socket_directories, named for its port), which no other
	// process can be listening on too.
	Direct bool
	// OwnKey is true when the backend key the server gave the connection
	// at startup names the server session its statements run in. A pooler
	// gives its clients keys of its own, so this holds through a relay of
	// bytes (docker's port forwarding, a TCP proxy) and through no pooler.
	// Only pgx exposes the key; elsewhere it stays false.
	OwnKey bool
	// Local is the client socket's address, and Seen where the server sees
	// the connection come from ("" on a Unix socket).
	Local, Seen string
}

// KeepsSession reports whether every statement of the connection runs in
// one server session, so that what one statement leaves on the server (a
// prepared statement, a LISTEN) is there for the next.
func (r Route) KeepsSession() bool { return r.Direct || r.OwnKey }

// String says what the route is, for logs and cairnq doctor.
func (r Route) String() string {
	switch {
	case r.Direct && r.Seen == "":
		return "direct to the server, through its own Unix socket"
	case r.Direct:
		return "direct to the server (it sees this client's own address, " + r.Local + ")"
	case r.OwnKey:
		return "one server session per connection (through a relay such as a port forward: the server sees " +
			r.Seen + ", and the connection's backend key is the server's own)"
	case r.Seen == "":
		return "not known to keep one server session (a Unix socket that is not one the server listens on)"
	}
	return "through a proxy or connection pooler (the server sees the connection come from " + r.Seen +
		", not from this client's " + r.Local + ")"
}

// Of finds the route of a connection whose socket has the local and
// remote addresses given (either nil where unknown), from the values of
// Query's row as its driver decoded them (text as a string or []byte,
// integers as any integer type, NULL as nil), and key, the process id of
// the connection's backend key (negative where the driver does not tell).
func Of(local, remote net.Addr, key int64, row []any) Route {
	r := Route{}
	if local != nil {
		r.Local = local.String()
	}
	if len(row) != Columns {
		return r
	}
	if pid, ok := integer(row[4]); ok && key >= 0 {
		r.OwnKey = pid == key
	}
	if sock, ok := remote.(*net.UnixAddr); ok {
		r.Direct = serversSocket(sock.Name, row[5], row[6])
		return r
	}
	client, ok := addrPort(row[0], row[1])
	if !ok {
		return r
	}
	r.Seen = client.String()
	server, ok := addrPort(row[2], row[3])
	r.Direct = ok && sameAddr(local, client) && sameAddr(remote, server)
	return r
}

// serversSocket reports whether path is the Unix socket of a server whose
// port and unix_socket_directories settings are given (text).
func serversSocket(path string, port, dirs any) bool {
	p, dirList := text(port), text(dirs)
	if p == "" || path == "" {
		return false
	}
	for d := range strings.SplitSeq(dirList, ",") {
		d = strings.TrimSpace(d)
		if d != "" && !strings.HasPrefix(d, "@") && filepath.Clean(path) == filepath.Join(d, ".s.PGSQL."+p) {
			return true
		}
	}
	return false
}

// text reads a text value as a driver gives it, "" for anything else.
func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []byte:
		return string(t)
	}
	return ""
}

// addrPort reads an address and a port of Query's row.
func addrPort(addr, port any) (netip.AddrPort, bool) {
	ip, err := netip.ParseAddr(text(addr))
	p, ok := integer(port)
	if err != nil || !ok || p < 0 || p > 65535 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), true
}

// sameAddr reports whether a is the TCP address ap.
func sameAddr(a net.Addr, ap netip.AddrPort) bool {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	return ok && ip.Unmap() == ap.Addr() && tcp.Port == int(ap.Port())
}

// integer reads an integer value as a driver gives it.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case uint32:
		return int64(n), true
	case []byte:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// Probe finds the route of one connection.
type Probe func(ctx context.Context) (Route, error)

// probeTimeout bounds one probe, whatever its caller's context.
const probeTimeout = 5 * time.Second

// retryAfter is how long a Gate waits after a failed probe before the
// next one: a server that is down is not asked at every statement.
const retryAfter = 30 * time.Second

// Gate holds one executor's route, learned by the first statement that
// needs it. Until a probe has succeeded the route counts as not keeping
// the session, so a statement never waits for another's probe, and a
// failed probe is tried again later. The zero Gate is ready.
type Gate struct {
	// keeps is the answer once known (1: keeps the session, 2: not), so
	// that every statement after the first reads it without a lock.
	keeps atomic.Int32

	mu      sync.Mutex
	probing bool
	retry   time.Time
}

// Direct reports whether the route is known to keep one server session
// per connection (Route.KeepsSession), running probe first when the route
// is not known yet, no probe is running and none failed within
// retryAfter. Its probe is bounded by ctx and probeTimeout.
func (g *Gate) Direct(ctx context.Context, probe Probe) bool {
	if k := g.keeps.Load(); k != 0 {
		return k == 1
	}
	g.mu.Lock()
	if g.keeps.Load() != 0 || g.probing || time.Now().Before(g.retry) {
		g.mu.Unlock()
		return g.keeps.Load() == 1
	}
	g.probing = true
	g.mu.Unlock()

	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	r, err := probe(pctx)
	cancel()

	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = false
	if err != nil {
		g.retry = time.Now().Add(retryAfter)
		return false
	}
	if r.KeepsSession() {
		g.keeps.Store(1)
	} else {
		g.keeps.Store(2)
	}
	return r.KeepsSession()
}
