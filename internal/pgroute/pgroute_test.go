package pgroute

import (
	"context"
	"errors"
	"net"
	"testing"
)

func TestOf(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5000}
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name   string
		local  net.Addr
		addr   *string
		port   *int64
		direct bool
	}{
		{"the server sees this socket", local, str("127.0.0.1"), num(5000), true},
		{"an IPv4-mapped address", local, str("::ffff:127.0.0.1"), num(5000), true},
		{"a pooler's port", local, str("127.0.0.1"), num(6000), false},
		{"a proxy's address", local, str("10.0.0.2"), num(5000), false},
		{"a Unix socket", &net.UnixAddr{Name: "/tmp/.s.PGSQL.5432", Net: "unix"}, nil, nil, false},
		{"an unreadable address", local, str("nonsense"), num(5000), false},
	} {
		r := Of(c.local, c.addr, c.port)
		if r.Direct != c.direct || r.KeepsSession() != c.direct || r.String() == "" {
			t.Errorf("%s: %+v (%s), want direct %v", c.name, r, r, c.direct)
		}
	}
	if r := (Route{OwnKey: true, Seen: "172.17.0.1:4000", Local: "127.0.0.1:5000"}); !r.KeepsSession() {
		t.Errorf("a relay passing the server's own key: %+v does not keep the session", r)
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
