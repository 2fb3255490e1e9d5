package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/console"
)

const uiHelp = `Serves the web console (package console) until interrupted: the overview,
the task list and each task, live as tasks move, a JSON API under /api/,
and Prometheus metrics at /metrics (queue depth, oldest due age, settled
rates; docs/operators.md has alert rules and autoscaling on them). It opens the database without creating or migrating anything.

It listens on 127.0.0.1:8080 unless --addr names another address; it is
read-only unless --allow-writes (cancel, retry, bulk actions, submit a
copy), and every write is a POST refused from another origin. Allowing
writes on an address other machines can reach (not loopback) without
--basic-auth prints a warning on stderr. An --addr listening on every
interface (0.0.0.0:P, [::]:P, :P) is announced as http://localhost:P.
--basic-auth NAME requires HTTP basic authentication on every request,
with the "user:password" held by the environment variable NAME (never on
the command line, where other users can read it). --hide-payloads keeps
payloads, results and metadata off every page.

It answers only for the host names a browser may rightly use for it:
localhost, 127.0.0.1 and ::1, the host of --addr (every address of this
machine, and its host name, when --addr listens on all of them), and each
--allow-host (comma-separated host names, such as the DNS name of a proxy
in front of it). A request naming any other host gets 421, which keeps a
page on another site from reaching the console by DNS rebinding.`

// uiShutdown bounds how long an interrupted ui waits for open requests
// (the live-update streams end with the server's context at once).
const uiShutdown = 5 * time.Second

func cmdUI(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlagsNoJSON()
	addr := fs.String("addr", "127.0.0.1:8080", "the `address` to listen on")
	writes := fs.Bool("allow-writes", false, "allow cancel, retry and submitting copies")
	hide := fs.Bool("hide-payloads", false, "show no payload, result or metadata")
	authVar := fs.String("basic-auth", "", "require basic auth with the user:password in this environment `variable`")
	allowHosts := fs.String("allow-host", "", "also answer for these comma-separated host `names`")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	var user, pass string
	if *authVar != "" {
		var ok bool
		user, pass, ok = strings.Cut(e.getenv(*authVar), ":")
		if !ok || user == "" || pass == "" {
			return e.usageError("--basic-auth %s: the variable must hold user:password", *authVar)
		}
	}
	d, err := e.connect(ctx)
	if err != nil {
		return err
	}
	c, err := d.open(ctx)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	h := console.Handler(c, &console.Options{AllowWrites: *writes, HidePayloads: *hide, Hosts: servedHosts(*addr, ln.Addr(), *allowHosts)})
	if user != "" {
		h = basicAuth(h, user, pass)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	url, where := consoleURL(ln.Addr())
	if *writes && user == "" && !isLoopback(ln.Addr()) {
		fmt.Fprintf(e.errOut, "cairnq: warning: writes are allowed without --basic-auth on %s: anyone who can reach it can cancel, retry and submit tasks\n", where)
	}
	mode := "read-only"
	if *writes {
		mode = "writes allowed"
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		mode += ", listening on all interfaces"
	}
	fmt.Fprintf(e.out, "cairnq console on %s (%s, %s); interrupt to stop\n", url, printable(d.t.String()), mode)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), uiShutdown)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// consoleURL is the URL to open the console listening on addr at, and
// where it listens, for a person: an address that is every address of
// this machine (0.0.0.0, [::]) is no address to browse to, so its URL
// names localhost and where says "all interfaces, port P".
func consoleURL(addr net.Addr) (url, where string) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + addr.String(), addr.String()
	}
	port := strconv.Itoa(tcp.Port)
	return "http://" + net.JoinHostPort("localhost", port), "all interfaces, port " + port
}

// isLoopback reports whether addr is a loopback address, which only this
// machine can reach.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// servedHosts are the hosts the console answers for (see uiHelp): the
// loopback names, the host of --addr as given and the address listened on
// (all of this machine's, and its host name, when that is every address),
// and extra.
func servedHosts(flag string, addr net.Addr, extra string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(flag); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	tcp, _ := addr.(*net.TCPAddr)
	switch {
	case tcp == nil:
	case tcp.IP.IsUnspecified():
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					hosts = append(hosts, ipn.IP.String())
				}
			}
		}
	default:
		hosts = append(hosts, tcp.IP.String())
	}
	for h := range strings.SplitSeq(extra, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// basicAuth requires user and pass on every request, answering 401 with a
// challenge so that a browser asks for them.
func basicAuth(h http.Handler, user, pass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(pass)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="cairnq", charset="UTF-8"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
