package sched

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processIdentity names process pid for as long as it lives, and never
// another: the boot's ID and the process's start time (in clock ticks
// since boot). "" when it cannot be read.
func processIdentity(pid int) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields are counted from the last ')'. Start time is field 22;
	// the one after ')' is field 3.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + fields[19]
}

// leaderGone reports whether process pid, named leader by
// processIdentity, has exited: it is a zombie, or gone, or its ID is
// another's since.
func leaderGone(pid int, leader string) bool {
	if leader == "" {
		return false // its identity could not be read: nothing to tell by
	}
	// Only what says so counts: a process taken for gone is not timed
	// out, and would run on past its timeout.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	s := string(stat)
	if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
		return true
	}
	id := processIdentity(pid)
	return id != "" && id != leader
}

// killLostGroup kills process group pgid of a run that an earlier
// scheduler lost, if its leader is still the process named leader. A
// group whose leader has exited is left alone: its ID may since be
// another's.
func killLostGroup(pgid int, leader string) bool {
	// A run's group is never init's (1), and -1 would signal every
	// process there is: only a damaged state file could name either.
	if pgid <= 1 || leader == "" || processIdentity(pgid) != leader {
		return false
	}
	return syscall.Kill(-pgid, syscall.SIGKILL) == nil
}
