//go:build unix

package store

import "golang.org/x/sys/unix"

// freeBytes is the space an unprivileged writer may still use on the filesystem holding dir.
func freeBytes(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true //nolint:unconvert // field types differ by platform
}
