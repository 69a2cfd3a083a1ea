//go:build unix

package agent

import "syscall"

// spoolReadFlags open a spool file for reading without following a
// symbolic link and without waiting for a writer of a FIFO: whatever
// stands under the name, open returns at once, and the reader looks at
// what it got (openSpoolFile).
const spoolReadFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
