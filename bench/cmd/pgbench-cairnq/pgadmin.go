package main

import (
	"context"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
)

// server is the Postgres server the measurements run on, with the
// settings the report prints.
type server struct {
	*pgadmin.Server
	settings map[string]string
	// statements is true when pg_stat_statements is preloaded.
	statements bool
}

func connectServer(ctx context.Context, dsn string) (*server, error) {
	base, err := pgadmin.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s := &server{Server: base, settings: map[string]string{}}
	conn, err := s.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "max_connections", "wal_sync_method", "shared_preload_libraries"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, err
		}
		s.settings[name] = v
	}
	s.statements = strings.Contains(s.settings["shared_preload_libraries"], "pg_stat_statements")
	return s, nil
}

// counters are server-side cumulative counters read around a measured
// window: commits in this database, and (cluster-wide, but the cluster is
// ours alone) WAL bytes and WAL flushes.
type counters struct {
	commits  int64
	walBytes int64 // pg_current_wal_lsn as a byte position
	walSyncs int64
	ok       bool
}

// readCounters reads the counters. Backends report commits to the
// statistics system when they go idle (at most once a second) or exit, so
// callers close their pools and give the backends a moment first.
func readCounters(ctx context.Context, d *pgadmin.Database) counters {
	conn, err := d.Server.Conn(ctx)
	if err != nil {
		return counters{}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c counters
	if err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", d.Name).Scan(&c.commits); err != nil {
		return counters{}
	}
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&c.walBytes); err != nil {
		return counters{}
	}
	if err := conn.QueryRow(ctx, "SELECT wal_sync FROM pg_stat_wal").Scan(&c.walSyncs); err != nil {
		return counters{}
	}
	c.ok = true
	return c
}

// settle gives backends that just exited time to report their statistics.
func settle() { time.Sleep(300 * time.Millisecond) }

func (c counters) delta(before counters) counters {
	if !c.ok || !before.ok {
		return counters{}
	}
	return counters{commits: c.commits - before.commits, walBytes: c.walBytes - before.walBytes, walSyncs: c.walSyncs - before.walSyncs, ok: true}
}
