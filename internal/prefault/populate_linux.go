package prefault

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Available says whether this system can populate memory in one call.
const Available = true

// populate asks the kernel to back every page of b, as if written, in one
// call: the pages stay zero.
func populate(b []byte) error { return unix.Madvise(b, unix.MADV_POPULATE_WRITE) }

// MemoryCeiling is the memory this process may have in bytes (0 if
// unknown): the machine's, or its control group's limit when lower (a
// container's memory on a larger host).
func MemoryCeiling() int64 {
	var si unix.Sysinfo_t
	var ceiling int64
	if unix.Sysinfo(&si) == nil {
		ceiling = int64(si.Totalram) * int64(si.Unit)
	}
	for _, path := range limitFiles() {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if n, ok := parseLimit(data); ok && (ceiling == 0 || n < ceiling) {
			ceiling = n
		}
	}
	return ceiling
}

// limitFiles are the memory limit files that may apply to this process:
// its own group's and the root's (inside a container the root is the
// container's), in cgroup v2 and v1.
func limitFiles() []string {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return files
	}
	unified, memory := cgroupPaths(data)
	if unified != "" && unified != "/" {
		files = append(files, filepath.Join("/sys/fs/cgroup", unified, "memory.max"))
	}
	if memory != "" && memory != "/" {
		files = append(files, filepath.Join("/sys/fs/cgroup/memory", memory, "memory.limit_in_bytes"))
	}
	return files
}
