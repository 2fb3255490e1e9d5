// Package readonly makes a directory of test files that the test process
// can only read, for the tests of what cairnq does with a database it may
// not write (an operator's copy, a backup on a read-only mount).
//
// It is test support only: nothing outside tests imports it.
package readonly

import (
	"os"
	"os/exec"
	"testing"
)

// Dir returns a directory showing dir's files, none of which this process
// may write, and says how: behind a read-only bind mount when the process
// runs as root (whom file permissions do not stop), else dir itself with
// its files made mode 444 and itself mode 555. Everything is undone when t
// ends. Without the rights to mount, t is skipped.
func Dir(t *testing.T, dir string) (path, how string) {
	t.Helper()
	if os.Geteuid() != 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Chmod(dir+"/"+e.Name(), 0o444); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return dir, "files of mode 444 in a directory of mode 555"
	}
	ro := t.TempDir()
	for _, args := range [][]string{{"--bind", dir, ro}, {"-o", "remount,ro,bind", ro}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Skipf("cannot make a read-only bind mount here: %v: %s", err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", ro).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", ro, err, out)
		}
	})
	return ro, "a read-only bind mount"
}
