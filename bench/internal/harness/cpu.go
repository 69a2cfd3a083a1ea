package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux the bench runs on.
const clockTicks = 100

// CPUTime is the user plus system CPU time process pid has used so far,
// from /proc/PID/stat (utime and stime, fields 14 and 15), at 10 ms grain.
func CPUTime(pid int) (time.Duration, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	ut, err1 := strconv.ParseInt(f[14], 10, 64)
	st, err2 := strconv.ParseInt(f[15], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[14], f[15])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// MinorFaults is how many minor page faults process pid has taken so far
// (minflt, field 10 of /proc/PID/stat): the first touches of memory it
// had not used before. Each is a trip into the kernel, dear on some
// virtual machines, so a process whose memory grows pays per page.
func MinorFaults(pid int) (int64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(f[10], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: minflt %q", pid, f[10])
	}
	return n, nil
}

// stat reads /proc/PID/stat into fields numbered as proc(5) numbers them:
// f[10] is field 10. f[0] to f[2] are empty.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := append(make([]string, 3), strings.Fields(string(b[i+1:]))...)
	if len(f) < 16 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)-1)
	}
	return f, nil
}

// LoadAvg is the first three fields of /proc/loadavg ("1.02 0.80 0.61"),
// for the record of how busy the machine was.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
