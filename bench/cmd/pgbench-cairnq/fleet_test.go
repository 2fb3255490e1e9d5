package main

import (
	"net/url"
	"strings"
	"testing"
)

// The fleet's connections are told apart by application_name, in either
// DSN form.
func TestWithAppName(t *testing.T) {
	u := withAppName("postgres://u@127.0.0.1:5432/db?sslmode=disable", "fleet-worker")
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if q := parsed.Query(); q.Get("application_name") != "fleet-worker" || q.Get("sslmode") != "disable" {
		t.Errorf("URL form: %s", u)
	}
	kv := withAppName("host=127.0.0.1 dbname=db", "fleet-worker")
	if !strings.HasSuffix(kv, " application_name=fleet-worker") {
		t.Errorf("keyword form: %s", kv)
	}
}

// The claim path counts cairnq's probe, recovery and claim and River's
// fetch; the bench's own progress reads are left out of every figure.
func TestFleetStatementClasses(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT probe.claimable OR probe.expired AS has_work, probe.expired AS has_expired FROM (...)": true,
		"UPDATE cairnq_tasks AS task SET status = $6 ... FOR UPDATE SKIP LOCKED":                       true,
		"-- name: JobGetAvailable :many WITH locked_jobs AS (... FOR UPDATE SKIP LOCKED":               true,
		"INSERT INTO cairnq_tasks (id, name) VALUES ($1, $2)":                                          false,
	} {
		if got := claimPath(q); got != want {
			t.Errorf("claimPath(%q) = %v", q, got)
		}
	}
	if !benchOwn("SELECT count(*) FROM river_job WHERE state = $1") ||
		!benchOwn("SELECT queue, status, count(*) AS count FROM cairnq_tasks GROUP BY queue, status") ||
		benchOwn("SELECT count(*) FROM cairnq_tasks WHERE queue = $1") {
		t.Error("benchOwn tells the bench's progress reads wrongly")
	}
}
