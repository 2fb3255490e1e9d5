package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// walWriteLocked reports whether a connection, of any process, holds the
// WAL write lock of the database whose -shm file is shm: a commit may be
// under way. known is false when the lock cannot be tested.
func walWriteLocked(shm *os.File) (busy, known bool) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: shmWriteLock, Len: 1}
	if err := unix.FcntlFlock(shm.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, false
	}
	return lk.Type != unix.F_UNLCK, true
}
