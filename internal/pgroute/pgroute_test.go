package pgroute

import (
	"context"
	"errors"
	"net"
	"testing"
)

func TestOf(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5000}
	remote := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5432}
	row := func(caddr any, cport any, saddr any, sport any, pid any) []any {
		return []any{caddr, cport, saddr, sport, pid, "5432", "/var/run/postgresql"}
	}
	unixRow := func(port, dirs string) []any { return []any{nil, nil, nil, nil, int64(9), port, dirs} }
	sock := func(path string) net.Addr { return &net.UnixAddr{Name: path, Net: "unix"} }
	for _, c := range []struct {
		name          string
		local, remote net.Addr
		key           int64
		row           []any
		direct, own   bool
	}{
		{"the server sees this socket at both ends", local, remote, -1, row("127.0.0.1", int64(5000), "127.0.0.1", int64(5432), int64(9)), true, false},
		{"as lib/pq gives text", local, remote, -1, row([]byte("::ffff:127.0.0.1"), []byte("5000"), "127.0.0.1", int32(5432), nil), true, false},
		{"a pooler's port", local, remote, -1, row("127.0.0.1", int64(6000), "127.0.0.1", int64(5432), int64(9)), false, false},
		{"the same local port to another destination", local, remote, -1, row("127.0.0.1", int64(5000), "127.0.0.1", int64(5433), int64(9)), false, false},
		{"a proxy's address", local, remote, -1, row("10.0.0.2", int64(5000), "127.0.0.1", int64(5432), int64(9)), false, false},
		{"a relay passing the server's key", local, remote, 9, row("172.17.0.1", int64(4000), "172.17.0.2", int64(5432), int64(9)), false, true},
		{"a pooler's key", local, remote, 77, row("172.17.0.1", int64(4000), "172.17.0.2", int64(5432), int64(9)), false, false},
		{"the server's own Unix socket", sock(""), sock("/tmp/.s.PGSQL.5432"), -1, unixRow("5432", "/var/run/postgresql, /tmp"), true, false},
		{"a pooler's Unix socket", sock(""), sock("/tmp/.s.PGSQL.6432"), -1, unixRow("5432", "/tmp"), false, false},
		{"a socket in another directory", sock(""), sock("/run/pgbouncer/.s.PGSQL.5432"), -1, unixRow("5432", "/tmp"), false, false},
		{"an abstract socket setting", sock(""), sock("@x/.s.PGSQL.5432"), -1, unixRow("5432", "@x"), false, false},
		{"an unreadable address", local, remote, -1, row("nonsense", int64(5000), "127.0.0.1", int64(5432), int64(9)), false, false},
		{"a short row", local, remote, 9, []any{"127.0.0.1"}, false, false},
	} {
		r := Of(c.local, c.remote, c.key, c.row)
		if r.Direct != c.direct || r.OwnKey != c.own || r.KeepsSession() != (c.direct || c.own) || r.String() == "" {
			t.Errorf("%s: %+v (%s), want direct %v, own key %v", c.name, r, r, c.direct, c.own)
		}
	}
}

// A Gate probes once, answers without waiting while a probe runs, and
// tries again only after a failed probe's pause.
func TestGate(t *testing.T) {
	var g Gate
	probes := 0
	fail := func(context.Context) (Route, error) { probes++; return Route{}, errors.New("down") }
	if g.Direct(context.Background(), fail) || g.Direct(context.Background(), fail) || probes != 1 {
		t.Fatalf("after a failed probe: %d probes, want 1 (the next waits out retryAfter)", probes)
	}
	var h Gate
	direct := func(context.Context) (Route, error) { probes++; return Route{Direct: true}, nil }
	probes = 0
	if !h.Direct(context.Background(), direct) || !h.Direct(context.Background(), direct) || probes != 1 {
		t.Fatalf("a direct route: %d probes, want 1", probes)
	}
	var k Gate
	inner := false
	k.Direct(context.Background(), func(ctx context.Context) (Route, error) {
		// A statement arriving while the probe runs does not wait for it.
		inner = k.Direct(ctx, direct)
		return Route{Direct: true}, nil
	})
	if inner || !k.Direct(context.Background(), direct) {
		t.Fatalf("during the probe: %v, want false; after it, true", inner)
	}
}
