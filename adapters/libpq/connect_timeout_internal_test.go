package cairnqlibpq

import (
	"os"
	"testing"
	"time"

	"github.com/lib/pq"
)

// unsetenv removes name from the environment for the test's duration.
func unsetenv(t *testing.T, name string) {
	t.Setenv(name, "") // restores the old value at cleanup
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// TestConnectTimeoutPrecedence: Options.ConnectTimeout, else the DSN's
// connect_timeout, else DefaultConnectTimeout; the listener's DSN carries
// the same limit in whole seconds.
func TestConnectTimeoutPrecedence(t *testing.T) {
	unsetenv(t, "PGCONNECT_TIMEOUT")
	if DefaultConnectTimeout != 10*time.Second {
		t.Errorf("DefaultConnectTimeout = %v, documented as 10 seconds", DefaultConnectTimeout)
	}
	for _, c := range []struct {
		name     string
		dsn      string
		opt      time.Duration
		want     time.Duration // Open's
		wantLsnr time.Duration // the listener's
	}{
		{"keyword/value without", "host=127.0.0.1 port=1 user=x", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"URL without", "postgres://x@127.0.0.1:1/db?sslmode=disable", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"postgresql URL without", "postgresql://x:p%20w@127.0.0.1:1/db", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"empty DSN", "", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"DSN's own", "host=127.0.0.1 connect_timeout=7", 0, 7 * time.Second, 7 * time.Second},
		{"URL's own", "postgres://x@127.0.0.1:1/db?connect_timeout=3", 0, 3 * time.Second, 3 * time.Second},
		{"DSN's zero counts as unset", "host=127.0.0.1 connect_timeout=0", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"URL's zero counts as unset", "postgres://x@h/db?connect_timeout=0", 0, DefaultConnectTimeout, DefaultConnectTimeout},
		{"option over DSN", "host=127.0.0.1 connect_timeout=7", 300 * time.Millisecond, 300 * time.Millisecond, time.Second},
		{"option over URL", "postgres://x@h/db?connect_timeout=7&sslmode=disable", 2500 * time.Millisecond, 2500 * time.Millisecond, 3 * time.Second},
		{"negative option", "host=127.0.0.1", -time.Second, DefaultConnectTimeout, DefaultConnectTimeout},
	} {
		cfg, err := pq.NewConfig(c.dsn)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := connectTimeout(c.opt, cfg.ConnectTimeout); got != c.want {
			t.Errorf("%s: connect timeout %v, want %v", c.name, got, c.want)
		}
		dsn, err := listenDSN(c.dsn, cfg.ConnectTimeout, c.opt)
		if err != nil {
			t.Errorf("%s: listenDSN: %v", c.name, err)
			continue
		}
		lcfg, err := pq.NewConfig(dsn)
		if err != nil {
			t.Errorf("%s: the listener's DSN %q does not parse: %v", c.name, dsn, err)
			continue
		}
		if lcfg.ConnectTimeout != c.wantLsnr {
			t.Errorf("%s: the listener's DSN %q has connect_timeout %v, want %v", c.name, dsn, lcfg.ConnectTimeout, c.wantLsnr)
		}
		// Nothing else changes.
		lcfg.ConnectTimeout, cfg.ConnectTimeout = 0, 0
		if lcfg.Host != cfg.Host || lcfg.Port != cfg.Port || lcfg.User != cfg.User ||
			lcfg.Password != cfg.Password || lcfg.Database != cfg.Database || lcfg.SSLMode != cfg.SSLMode {
			t.Errorf("%s: the listener's DSN %q is not %q with a connect_timeout", c.name, dsn, c.dsn)
		}
	}
}
