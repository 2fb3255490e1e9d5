package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgdsn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// server is the Postgres server named by BENCH_PG_DSN (or --dsn). Its role
// must be allowed to CREATE DATABASE; every measurement runs in a database
// of its own, created before and dropped after.
type server struct {
	adminDSN string
	version  string
	settings map[string]string
	// statements is true when pg_stat_statements is preloaded.
	statements bool
}

func connectServer(ctx context.Context, dsn string) (*server, error) {
	s := &server{adminDSN: dsn, settings: map[string]string{}}
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&s.version); err != nil {
		return nil, err
	}
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

func (s *server) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return nil, fmt.Errorf("connect to the server (BENCH_PG_DSN %s): %w", redact(s.adminDSN), err)
	}
	return conn, nil
}

func (s *server) exec(ctx context.Context, sql string, args ...any) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// database is one throwaway database.
type database struct {
	srv  *server
	name string
	dsn  string
}

// freshDatabase creates an empty database for one measurement.
func (s *server) freshDatabase(ctx context.Context, label string) (*database, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "bench_" + label + "_" + hex.EncodeToString(rnd[:])
	ident := pgx.Identifier{name}.Sanitize()
	err := s.exec(ctx, "CREATE DATABASE "+ident+" STRATEGY = FILE_COPY")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" { // before PostgreSQL 15
		err = s.exec(ctx, "CREATE DATABASE "+ident)
	}
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := pgdsn.WithDatabase(s.adminDSN, name)
	if err != nil {
		return nil, err
	}
	return &database{srv: s, name: name, dsn: dsn}, nil
}

// drop drops the database, ending sessions left on it.
func (d *database) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.srv.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
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
func (d *database) readCounters(ctx context.Context) counters {
	conn, err := d.srv.connect(ctx)
	if err != nil {
		return counters{}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var c counters
	if err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", d.name).Scan(&c.commits); err != nil {
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

func redact(dsn string) string {
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
