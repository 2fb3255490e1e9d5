package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgdsn"
	"github.com/jackc/pgx/v5"
)

// server is the Postgres server named by --dsn; every measurement runs in
// a database of its own, created before and dropped after.
type server struct {
	adminDSN string
	version  string
}

func connectServer(ctx context.Context, dsn string) (*server, error) {
	s := &server{adminDSN: dsn}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to the server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&s.version); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

type database struct {
	srv  *server
	name string
	dsn  string
}

func (s *server) freshDatabase(ctx context.Context, label string) (*database, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "bench_" + label + "_" + hex.EncodeToString(rnd[:])
	if err := s.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := pgdsn.WithDatabase(s.adminDSN, name)
	if err != nil {
		return nil, err
	}
	return &database{srv: s, name: name, dsn: dsn}, nil
}

func (d *database) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.srv.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
}
