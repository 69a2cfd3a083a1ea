package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Usage is what /proc says about a process at one moment.
type Usage struct {
	RSS     int64 // bytes
	Threads int
	FDs     int
}

// Sample reads /proc/PID for RSS, threads and open files (Linux only).
func Sample(pid int) (Usage, error) {
	var u Usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			u.RSS = n * 1024
		case "Threads":
			u.Threads = int(n)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = len(ents)
	return u, nil
}

// MiB formats bytes as MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
