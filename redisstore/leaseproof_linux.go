package redisstore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// selfProof is this process's proof, ok false when /proc does not give
// one that another process could check: /proc of another PID namespace
// than this process's (its /proc/self is not this PID), or parts missing.
func selfProof() (procProof, bool) {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, "/ ") {
		return procProof{}, false
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return procProof{}, false
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return procProof{}, false
	}
	pid, start, state, ok := readStat("self")
	if !ok || pid != os.Getpid() || state == 'Z' {
		return procProof{}, false
	}
	p := procProof{host: host, boot: strings.TrimSpace(string(boot)), pidNS: ns, pid: pid, start: start}
	if strings.ContainsAny(p.boot+p.pidNS, "/ ") || p.boot == "" {
		return procProof{}, false
	}
	return p, true
}

// processAlive says whether a process with pid and start time runs: a
// zombie (killed, not yet reaped) does not; anything /proc does not
// answer plainly is taken as alive.
func processAlive(pid int, start uint64) bool {
	_, got, state, ok := readStat(strconv.Itoa(pid))
	if !ok {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return !errors.Is(err, fs.ErrNotExist)
	}
	return got == start && state != 'Z' && state != 'X' && state != 'x'
}

// readStat reads /proc/<which>/stat: the PID, the start time (field 22)
// and the state (field 3). The command name (field 2) is in parentheses
// and may hold anything, so the fields after it are found from the last
// ')'.
func readStat(which string) (pid int, start uint64, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + which + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return 0, 0, 0, false
	}
	pid, err = strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[end+1:])) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, 0, false
	}
	return pid, start, f[0][0], true
}
