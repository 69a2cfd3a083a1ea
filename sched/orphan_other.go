//go:build !linux

package sched

// Elsewhere a process's identity cannot be told, so the group of a run
// that an earlier scheduler lost is never killed: it could be another's.

func processIdentity(int) string { return "" }

func killLostGroup(int, string) bool { return false }

func leaderGone(int, string) bool { return false }
