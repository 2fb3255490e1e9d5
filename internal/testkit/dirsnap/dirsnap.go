// Package dirsnap checks that a directory was left as it was: the tests
// of a read that must not create, migrate or touch a SQLite database (a
// -wal or -shm file appearing counts as a change).
package dirsnap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Snapshot is every entry of one directory and, for files, their bytes.
type Snapshot map[string][]byte

// Take reads every entry of dir (not recursively); a subdirectory is
// recorded by its name with a trailing slash.
func Take(t testing.TB, dir string) Snapshot {
	t.Helper()
	out := Snapshot{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()+"/"] = nil
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// Same fails t for every entry of dir that appeared, changed or
// disappeared since before was taken.
func Same(t testing.TB, dir string, before Snapshot) {
	t.Helper()
	after := Take(t, dir)
	for name, b := range after {
		if old, ok := before[name]; !ok {
			t.Errorf("%s appeared", name)
		} else if !bytes.Equal(old, b) {
			t.Errorf("%s changed", name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s disappeared", name)
		}
	}
}
