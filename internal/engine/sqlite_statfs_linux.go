package engine

import "golang.org/x/sys/unix"

// freeBytes is the space left to this process on the file system holding
// dir: the blocks available to unprivileged users, or to root every free
// block, since root may write into the reserve.
func freeBytes(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	blocks := st.Bavail
	if unix.Geteuid() == 0 {
		blocks = st.Bfree
	}
	return blocks * uint64(st.Bsize), true
}
