package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// uiRun is a ui started in the background, once its banner is out.
type uiRun struct {
	banner, stderr string // stderr as it was when the banner came
	url            string // the URL the banner names
}

// startUI runs ui with args until the test ends, and returns once it has
// printed its banner. Anything ui warns about, it prints before.
func startUI(t *testing.T, vars map[string]string, args ...string) uiRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"ui"}, args...), &env{out: &out, errOut: &errOut, getenv: func(k string) string { return vars[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ui %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
	})
	var u uiRun
	waitFor(t, "the console's banner", func() bool {
		u.banner = out.String()
		return strings.HasSuffix(u.banner, "\n")
	})
	u.stderr = errOut.String()
	if _, rest, ok := strings.Cut(u.banner, "http://"); ok {
		u.url = "http://" + strings.Fields(rest)[0]
	}
	return u
}

// ui on every interface named its address http://[::]:P, no URL to
// browse to, and allowed writes there without auth and without a word.
// It now names http://localhost:P, says it listens on all interfaces, and
// warns on stderr when writes are allowed without auth anywhere but on
// loopback.
func TestUIAllInterfaces(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	const warning = "cairnq: warning: writes are allowed without --basic-auth on "
	auth := map[string]string{"UI_AUTH": "u:p"}

	u := startUI(t, nil, "--db", db, "--addr", "0.0.0.0:0", "--allow-writes")
	if !strings.HasPrefix(u.url, "http://localhost:") || !strings.Contains(u.banner, "listening on all interfaces") {
		t.Errorf("ui on 0.0.0.0: banner %q, want http://localhost:P and all interfaces", u.banner)
	}
	port := strings.TrimPrefix(u.url, "http://localhost:")
	if want := warning + "all interfaces, port " + port + ": anyone who can reach it can cancel, retry and submit tasks\n"; u.stderr != want {
		t.Errorf("ui on 0.0.0.0 --allow-writes without auth: stderr %q, want %q", u.stderr, want)
	}
	resp, err := http.Get(u.url + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s/api/overview: %d\n%s", u.url, resp.StatusCode, body)
	}

	for _, c := range []struct {
		vars map[string]string
		args []string
		warn bool
	}{
		{nil, []string{"--addr", ":0", "--allow-writes"}, true},
		{nil, []string{"--addr", "0.0.0.0:0"}, false},
		{auth, []string{"--addr", "0.0.0.0:0", "--allow-writes", "--basic-auth", "UI_AUTH"}, false},
		{nil, []string{"--addr", "127.0.0.1:0", "--allow-writes"}, false},
		{nil, []string{"--addr", "localhost:0", "--allow-writes"}, false},
	} {
		u := startUI(t, c.vars, append([]string{"--db", db}, c.args...)...)
		if got := strings.HasPrefix(u.stderr, warning); got != c.warn || !c.warn && u.stderr != "" {
			t.Errorf("ui %s: stderr %q, want a warning: %v", strings.Join(c.args, " "), u.stderr, c.warn)
		}
		if strings.Contains(u.url, "[::]") || strings.Contains(u.url, "0.0.0.0") {
			t.Errorf("ui %s: banner %q names no address to browse to", strings.Join(c.args, " "), u.banner)
		}
	}
}

// ui serves the metrics at /metrics, in Prometheus' text format, behind
// --basic-auth like every other route.
func TestUIMetrics(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	ok(t, "submit", "--db", db, "--queue", "mail", "email", "{}")
	u := startUI(t, map[string]string{"UI_AUTH": "u:p"}, "--db", db, "--addr", "127.0.0.1:0", "--basic-auth", "UI_AUTH")
	get := func(auth bool) (int, string, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u.url+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("u", "p")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	if status, _, _ := get(false); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without credentials: %d, want 401", status)
	}
	status, ctype, body := get(true)
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/plain; version=0.0.4") ||
		!strings.Contains(body, "\n"+`cairnq_tasks{queue="mail",name="email",status="queued"} 1`+"\n") {
		t.Errorf("GET /metrics: %d %q\n%s", status, ctype, body)
	}
}
