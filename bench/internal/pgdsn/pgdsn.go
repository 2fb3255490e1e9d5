// Package pgdsn edits Postgres connection strings for the benchmark
// programs, which each run every measurement in a fresh database.
package pgdsn

import (
	"fmt"
	"net/url"
	"strings"
)

// WithDatabase returns dsn with its database replaced by name, in the URL
// or the keyword/value form.
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
	return strings.TrimSpace(dsn) + " dbname='" + name + "'", nil
}
