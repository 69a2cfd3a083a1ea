package prefault

import (
	"bytes"
	"strconv"
)

// cgroupPaths reads /proc/self/cgroup: the process's group in the unified
// hierarchy (cgroup v2, the line "0::PATH") and in the v1 hierarchy that
// has the memory controller ("N:...memory...:PATH"); "" where absent.
func cgroupPaths(data []byte) (unified, memory string) {
	for line := range bytes.Lines(data) {
		id, rest, ok := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		if !ok {
			continue
		}
		controllers, path, ok := bytes.Cut(rest, []byte(":"))
		if !ok || len(path) == 0 || path[0] != '/' {
			continue
		}
		switch {
		case string(id) == "0" && len(controllers) == 0:
			unified = string(path)
		case hasController(controllers, "memory"):
			memory = string(path)
		}
	}
	return unified, memory
}

func hasController(list []byte, name string) bool {
	for c := range bytes.SplitSeq(list, []byte(",")) {
		if string(c) == name {
			return true
		}
	}
	return false
}

// noLimit: cgroup v1 writes "no limit" as the largest page-aligned int64.
const noLimit = 1 << 60

// parseLimit reads a memory limit file (memory.max, or v1's
// memory.limit_in_bytes): a byte count, or "max" for none. It reports
// false for none and for anything it cannot read.
func parseLimit(data []byte) (int64, bool) {
	s := string(bytes.TrimSpace(data))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= noLimit {
		return 0, false
	}
	return n, true
}
