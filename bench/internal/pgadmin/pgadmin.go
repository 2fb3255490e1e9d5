// Package pgadmin gives the benchmark programs their Postgres server:
// every measurement runs in a database of its own, created before it and
// dropped after.
package pgadmin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

// Server is the server named by BENCH_PG_DSN (or --dsn). Its role must be
// allowed to CREATE DATABASE.
type Server struct {
	AdminDSN string
	Version  string // server_version
}

// Connect checks that the server answers and reads its version.
func Connect(ctx context.Context, dsn string) (*Server, error) {
	s := &Server{AdminDSN: dsn}
	conn, err := s.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&s.Version); err != nil {
		return nil, err
	}
	return s, nil
}

// Conn opens a connection to the server's admin database; the caller
// closes it.
func (s *Server) Conn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, s.AdminDSN)
	if err != nil {
		return nil, fmt.Errorf("connect to the server (BENCH_PG_DSN %s): %w", pgdsn.Redact(s.AdminDSN), err)
	}
	return conn, nil
}

// Exec runs one statement on a connection of its own.
func (s *Server) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := s.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Database is one throwaway database.
type Database struct {
	Server *Server
	Name   string
	DSN    string // the server's DSN, naming this database
}

// FreshDatabase creates an empty database for one measurement, named
// after label. FILE_COPY checkpoints before and after the copy, so a
// measurement does not inherit the dirty buffers of the one before it.
func (s *Server) FreshDatabase(ctx context.Context, label string) (*Database, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "bench_" + label + "_" + hex.EncodeToString(rnd[:])
	ident := pgx.Identifier{name}.Sanitize()
	err := s.Exec(ctx, "CREATE DATABASE "+ident+" STRATEGY = FILE_COPY")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42601" { // before PostgreSQL 15
		err = s.Exec(ctx, "CREATE DATABASE "+ident)
	}
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := pgdsn.WithDatabase(s.AdminDSN, name)
	if err != nil {
		return nil, err
	}
	return &Database{Server: s, Name: name, DSN: dsn}, nil
}

// Drop drops the database, ending sessions left on it.
func (d *Database) Drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.Server.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.Name}.Sanitize()+" WITH (FORCE)")
}
