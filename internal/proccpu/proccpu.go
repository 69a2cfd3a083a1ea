// Package proccpu reads the CPU time this process has used, for
// benchmarks that report it beside wall time: on a shared machine the
// other load inflates wall time, not the process's own CPU.
package proccpu
