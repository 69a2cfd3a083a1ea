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
	Peak    int64 // bytes: the highest RSS since start or the last ResetPeak (VmHWM)
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
		case "VmHWM":
			u.Peak = n * 1024
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

// ResetPeak sets the process's peak RSS (Usage.Peak) to its RSS now, so
// that the next Sample's Peak is the highest RSS since this call, however
// short the spike: a sampler every second misses a request that takes a
// gigabyte for 50 ms. Linux 4.0 and later, for a process this one may
// trace (its own children).
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// MiB formats bytes as MiB with one decimal.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
