package pgdsn

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithDatabase(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/newdb?sslmode=disable"},
		{"postgresql://u@h", "postgresql://u@h/newdb"},
		{"postgres://u@h/postgres?dbname=postgres", "postgres://u@h/newdb?dbname=newdb"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname='newdb'"},
	}
	for _, c := range cases {
		got, err := WithDatabase(c.in, "newdb")
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got != c.want {
			t.Errorf("WithDatabase(%q) = %q, want %q", c.in, got, c.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if cfg.Database != "newdb" {
			t.Errorf("%s parses to database %q", got, cfg.Database)
		}
	}
}

func TestWithHostPort(t *testing.T) {
	for _, in := range []string{
		"postgres://u:p@h:5432/db?sslmode=disable",
		"postgresql://u@h/db",
		"postgres://u@/db?host=/tmp&port=5432",
		"host=h port=5432 user=u dbname=db",
	} {
		got, err := WithHostPort(in, "127.0.0.1:6432")
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if cfg.Host != "127.0.0.1" || cfg.Port != 6432 || cfg.Database != "db" || cfg.User != "u" {
			t.Errorf("WithHostPort(%q) = %q: host %s port %d db %s user %s", in, got, cfg.Host, cfg.Port, cfg.Database, cfg.User)
		}
	}
}
