package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestDemoRunsToCompletion(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	out, err := runCLI(t, "demo", "--db", db, "--n", "120", "--concurrency", "4")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	// 118 sample tasks succeed (some after a retry), the flaky one fails,
	// the delayed one was canceled.
	for _, want := range []string{
		`default\s+0\s+0\s+78\s+1\s+1`,
		`gpu\s+0\s+0\s+40\s+0\s+0`,
		`120 tasks settled in .*tasks/s \(concurrency 4\)`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Error("progress rewrote a line in place on a non-terminal")
	}

	// The inspection commands work on the file the demo left.
	if out, err := runCLI(t, "stats", "--db", db, "--queue", "gpu"); err != nil || !strings.Contains(out, "gpu") {
		t.Errorf("stats: %v\n%s", err, out)
	}
	out, err = runCLI(t, "list", "--db", db, "--status", "failed")
	if err != nil || !strings.Contains(out, "flaky") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`task_[0-9A-Z]{26}`).FindString(out)
	if out, err := runCLI(t, "get", "--db", db, id); err != nil || !strings.Contains(out, `"code": "bad_input"`) {
		t.Errorf("get: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "retry", "--db", db, id); err != nil || !strings.Contains(out, "queued") {
		t.Errorf("retry: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "cancel", "--db", db, id); err != nil || !strings.Contains(out, "canceled") {
		t.Errorf("cancel: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "submit", "--db", db, "render", `{"N": 5}`); err != nil || !strings.HasPrefix(out, "task_") {
		t.Errorf("submit: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "purge", "--db", db, "--older-than", "0s"); err != nil || !strings.Contains(out, "purged") {
		t.Errorf("purge: %v\n%s", err, out)
	}
	out, err = runCLI(t, "watch", "--db", db, "--poll", "10ms", "--for", "200ms")
	if err != nil || !strings.Contains(out, "start") || !strings.Contains(out, "poll") || !strings.Contains(out, "1 queued") {
		t.Errorf("watch: %v\n%s", err, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"demo", "--n", "1"},
		{"demo", "--bogus"},
		{"submit", "--db", filepath.Join(t.TempDir(), "x.db"), "name", "{not json"},
		{"get", "--db", filepath.Join(t.TempDir(), "x.db")},
	} {
		if _, err := runCLI(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
