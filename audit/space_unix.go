//go:build linux || darwin

package audit

import "syscall"

// diskSpace returns the bytes an unprivileged writer may still use on the
// filesystem that holds dir, and the filesystem's size.
func diskSpace(dir string) (avail, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}
