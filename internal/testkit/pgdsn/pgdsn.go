// Package pgdsn edits and prints Postgres connection strings, in the URL
// and the keyword/value form alike. The test server (internal/pgtest) and
// the benchmark programs (bench/) both run their work in databases they
// create, so both need a DSN pointed at another database, and both print
// the DSNs they use.
package pgdsn

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// WithDatabase returns dsn with its database replaced by name.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse DSN URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		q := u.Query()
		if q.Has("dbname") {
			q.Set("dbname", name)
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return strings.TrimSpace(dsn) + " dbname=" + quoteKeywordValue(name), nil
}

// WithHostPort returns dsn with its host and port replaced by addr
// (host:port), in whichever of the two forms dsn is written.
func WithHostPort(dsn, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse DSN URL: %w", err)
		}
		u.Host = net.JoinHostPort(host, port)
		q := u.Query()
		if q.Has("host") || q.Has("port") {
			q.Del("host")
			q.Del("port")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " host=" + quoteKeywordValue(host) + " port=" + port, nil
}

// quoteKeywordValue quotes v for a keyword/value DSN.
func quoteKeywordValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Redact hides the password of a DSN for printing.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
		return dsn
	}
	if strings.Contains(dsn, "password") {
		return "(keyword/value DSN with a password)"
	}
	return dsn
}
